"""The openai SDK's response model classes a reply is parsed into, built once before threads share them.

Reads and writes nothing but those classes' pydantic schemas (in this process).

The SDK defers each model class's schema to its first use (pydantic's `defer_build`), and pydantic's
deferred build is not thread-safe (`BaseModel.model_rebuild` says so): the thread that builds a class
first deletes the class's `MockCoreSchema` attribute, and a thread parsing a reply of the same class
meanwhile reads `BaseModel`'s own `MockCoreSchema` through the class hierarchy and fails with
PydanticUserError ("BaseModel cannot be instantiated directly") or AttributeError. A trial's first
concurrent calls (a step's candidates, generated at once) and `check-endpoints`' concurrent probes met
it on a loaded machine; the agent failed its trial at its first step, or at the first step after every
resume.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Iterator

import pydantic
from openai.pagination import SyncPage
from openai.types import Model
from openai.types.chat import ChatCompletion

_lock = threading.Lock()
_built: list[type[pydantic.BaseModel]] = []
"""The classes built, held here too: pydantic caches `SyncPage[Model]` weakly, and a class made anew
later would be unbuilt again."""


def _model_classes(annotation: object) -> Iterator[type[pydantic.BaseModel]]:
    """The pydantic model classes an annotation names, through unions, containers and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _model_classes(argument)


def build_response_models() -> None:
    """Build the schema of every model class a chat completion or a /models page is parsed into (the
    classes their fields name, transitively), once per process.

    Call it before threads parse replies. A class whose schema cannot be built now (a name the SDK
    defines later) is left for its first use, as the SDK leaves every class.
    """
    with _lock:
        if _built:
            return
        stack: list[type[pydantic.BaseModel]] = [SyncPage[Model], ChatCompletion]
        while stack:
            cls = stack.pop()
            if cls in _built:
                continue
            cls.model_rebuild(raise_errors=False)
            _built.append(cls)
            for info in cls.model_fields.values():
                stack.extend(_model_classes(info.annotation))
