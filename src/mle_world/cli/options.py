"""Shared flag parsing of the CLI: the one-line-error parser, value types, default paths, endpoint flags.

Reads the environment (XDG_CACHE_HOME) and the working directory for defaults; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from pydantic import ValidationError

from mle_world.errors import UserError
from mle_world.records import ROLES, EndpointSettings, Role

if TYPE_CHECKING:
    from mle_world.plan.config import PaperConfig

PROG = "run_paper.py"


def default_config_path(name: str) -> Path:
    """`configs/<name>` of the working directory when there is one, else the package's default."""
    local = Path("configs") / name
    from mle_world.plan.config import packaged_config  # the configs' models: not for every command

    return local if local.exists() else packaged_config(name)


def default_data_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mle-bench" / "data"


def csv_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def seed_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(item) for item in csv_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def positive_int_list(text: str) -> tuple[int, ...]:
    values = tuple(positive_int(item) for item in csv_list(text))
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "expected a non-empty value (is the shell variable it came from set?)"
        )
    return text.strip()


def path_arg(text: str) -> Path:
    """A path flag's value; an empty one (`--data-dir "$DATA_DIR"` with the variable unset) is refused
    instead of becoming Path("") == the working directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "expected a path, got an empty value (is the shell variable it came from set?)"
        )
    return Path(text)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):  # inf priced a sweep at $inf
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


MAX_INTERVAL_S = 86_400.0
"""`status --watch --interval`'s largest: a day (a sleep past the platform's time_t was a traceback)."""


def interval_seconds(text: str) -> float:
    value = positive_float(text)
    if value > MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_INTERVAL_S:.0f} seconds, got {text!r}")
    return value


class Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line with exit code 2 (its default code, kept)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def add_endpoint_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoints-file",
        type=path_arg,
        help="replicas' URLs per role, as written by scripts/serve/serve_replicas.sh (--ROLE-url wins)",
    )
    for role in ROLES:
        parser.add_argument(
            f"--{role}-url",
            type=non_empty,
            help=f"{role} endpoint base URL, or several replicas' URLs separated by commas",
        )
        parser.add_argument(
            f"--{role}-model", type=non_empty, help=f"{role} served model id (default: discovered)"
        )


@dataclass(frozen=True)
class EndpointFlags:
    """`--endpoints-file` and the `--ROLE-url`/`--ROLE-model` given (the sweep's and check-endpoints')."""

    endpoints_file: Path | None = None
    urls: Mapping[Role, str] = field(default_factory=dict)
    models: Mapping[Role, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EndpointFlags:
        # Read-only views: a frozen request's endpoints cannot change under planning either.
        return cls(
            endpoints_file=args.endpoints_file,
            urls=MappingProxyType({r: getattr(args, f"{r}_url") for r in ROLES if getattr(args, f"{r}_url")}),
            models=MappingProxyType(
                {r: getattr(args, f"{r}_model") for r in ROLES if getattr(args, f"{r}_model")}
            ),
        )

    def given(self, role: Role, name: str) -> str | None:
        """The value `--ROLE-<name>` gave, if any (an endpoint field without a flag: None)."""
        return {"url": self.urls, "model": self.models}.get(name, {}).get(role)


def endpoint_overrides(config: PaperConfig, flags: EndpointFlags) -> dict[Role, EndpointSettings]:
    """The config's endpoints, then the endpoints file's URLs, then `--<role>-url/--<role>-model`."""
    from mle_world.plan.config import read_endpoints_file

    listed = read_endpoints_file(flags.endpoints_file) if flags.endpoints_file else None
    unflagged = [role for role in ROLES if role not in flags.urls]
    if listed is not None and unflagged and not any(listed.urls(role) for role in ROLES):
        # Replicas add themselves once ready; an empty file meant the config's localhost URLs, silently.
        raise UserError(
            f"--endpoints-file {flags.endpoints_file}: lists no replica yet (each adds its URL when ready; wait "
            f"with: python scripts/serve/serve_config.py wait-endpoints {flags.endpoints_file} coder=N ...)"
        )
    out: dict[Role, EndpointSettings] = {}
    for role in ROLES:
        update: dict[str, object] = {}
        if listed is not None and listed.urls(role):
            update["url"] = listed.urls(role)
        if role in flags.urls:
            update["url"] = flags.urls[role]
        if role in flags.models:
            update["model"] = flags.models[role]
        # Validated, not copied: a comma-separated --ROLE-url is a list of replicas.
        try:
            out[role] = EndpointSettings.model_validate({**config.endpoints[role].model_dump(), **update})
        except ValidationError as error:
            first = error.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "url"
            source = f"--{role}-{name}"
            if not flags.given(role, name) and flags.endpoints_file:
                source = f"{flags.endpoints_file}: {role}"
            raise UserError(f"{source}: {str(first['msg']).removeprefix('Value error, ')}") from None
    return out
