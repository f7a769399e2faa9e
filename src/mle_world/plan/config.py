"""Loading and validation of the paper config (paper.yaml + tasks.txt) and the cluster config.

Reads YAML/text files; writes nothing. Every problem becomes one `ConfigError` line naming file and key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from mle_world.errors import ConfigError, not_utf8
from mle_world.identity import sweep_hash
from mle_world.plan.cluster import ClusterConfig
from mle_world.records import (
    ROLES,
    AgentSettings,
    BudgetSettings,
    EndpointSettings,
    EndpointsFile,
    Record,
    Regime,
    Role,
    SearchSettings,
    StageGuidance,
    WorldModelSettings,
)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _File(Record):
    """paper.yaml's sections: immutable, unknown keys rejected (a typo is an error)."""


class ServeSettings(_File):
    """How scripts/serve/ starts the model server of one role."""

    model: str
    port: int = Field(gt=0, lt=65536)
    gpus: int = Field(1, ge=1)
    max_model_len: int = Field(32768, gt=0)
    extra_args: tuple[str, ...] = ()


class AgentOptions(_File):
    data_preview: bool = True
    obfuscate: bool = False


class WorldModelDefaults(_File):
    min_confidence: float = Field(0.6, ge=0.0, le=1.0)
    max_consecutive_skips: int = Field(3, ge=0)
    bug_threshold: float = Field(0.5, ge=0.0, le=1.0)
    temperature: float = Field(1.0, ge=0.0, le=2.0)


class ConfigurationEntry(_File):
    world_model: dict[str, Any]


class PaperFile(_File):
    """The schema of paper.yaml (and of demo.yaml and any user variant)."""

    version: Literal[1]
    name: str
    seeds: tuple[int, ...] = Field(min_length=1)
    tasks: str | tuple[str, ...]
    regimes: tuple[Regime, ...] = Field(min_length=1)
    endpoints: dict[Role, EndpointSettings]
    serve: dict[Role, ServeSettings] = Field(default_factory=dict)
    budget: BudgetSettings
    search: SearchSettings
    agent: AgentOptions = AgentOptions()
    stages: tuple[StageGuidance, ...] = Field(min_length=1)
    world_model_defaults: WorldModelDefaults = WorldModelDefaults()
    configurations: dict[str, ConfigurationEntry] = Field(min_length=1)

    @field_validator("seeds", "regimes")
    @classmethod
    def _unique(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        dupes = sorted({str(v) for v in value if value.count(v) > 1})
        if dupes:
            raise ValueError(f"duplicate entries: {', '.join(dupes)}")
        return value

    @field_validator("endpoints")
    @classmethod
    def _all_roles(cls, value: dict[Role, EndpointSettings]) -> dict[Role, EndpointSettings]:
        missing = [r for r in ROLES if r not in value]
        if missing:
            raise ValueError(f"missing roles: {', '.join(missing)}")
        if value["coder"].structured_output != "none":
            # The coder answers with a plan and a code block, never with a JSON object.
            raise ValueError(
                "coder.structured_output: only the world and feedback roles reply with JSON; use none"
            )
        return value

    @field_validator("stages")
    @classmethod
    def _ordered_stages(cls, value: tuple[StageGuidance, ...]) -> tuple[StageGuidance, ...]:
        bounds = [s.until for s in value]
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError("stages must have strictly increasing 'until'")
        if bounds[-1] != 1.0:
            raise ValueError("the last stage must have until: 1.0")
        return value


@dataclass(frozen=True)
class PaperConfig:
    """A validated paper config with its task list resolved and configurations merged."""

    path: Path
    name: str
    seeds: tuple[int, ...]
    tasks: tuple[str, ...]
    tasks_source: str
    regimes: tuple[Regime, ...]
    endpoints: Mapping[Role, EndpointSettings]
    serve: Mapping[Role, ServeSettings]
    budget: BudgetSettings
    search: SearchSettings
    agent: AgentOptions
    stages: tuple[StageGuidance, ...]
    configurations: Mapping[str, WorldModelSettings]

    def agent_settings(self, configuration: str) -> AgentSettings:
        """The resolved settings the agent of one configuration runs with."""
        return AgentSettings(
            endpoints=dict(self.endpoints),
            budget=self.budget,
            search=self.search,
            stages=self.stages,
            world_model=self.configurations[configuration],
            data_preview=self.agent.data_preview,
            obfuscate=self.agent.obfuscate,
        )


def _loc(parts: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _first_error(path: Path, exc: ValidationError, prefix: str = "") -> ConfigError:
    err = exc.errors()[0]
    where = _loc(tuple(err["loc"]))
    if prefix:
        where = f"{prefix}.{where}" if err["loc"] else prefix
    if err["type"] == "extra_forbidden":
        return ConfigError(f"{path}: {where}: unknown key")
    if err["type"] == "missing":
        return ConfigError(f"{path}: {where}: required key is missing")
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] in ("tuple_type", "list_type"):
        # pydantic says "Input should be a valid tuple": a YAML user wrote one value where a list goes.
        msg = f"expected a list in brackets, e.g. [{err['input']}], got {err['input']!r}"
    if err["type"] == "value_error" and not err["loc"] and not prefix:
        return ConfigError(f"{path}: {msg}")  # a rule across fields names them itself
    return ConfigError(f"{path}: {where}: {msg}")


# libyaml's parser when PyYAML was built with it (it is, from PyPI wheels): the same documents and
# marks, several times faster than the pure-Python one.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key '{key}' (first at line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def packaged_config(name: str) -> Path:
    """A default config shipped inside the package (`mle_world/configs/`; a checkout's configs/ links there)."""
    return Path(str(resources.files("mle_world").joinpath("configs", name)))


def read_endpoints_file(path: Path) -> EndpointsFile:
    """The replicas' URLs per role from an endpoints file (scripts/serve/serve_replicas.sh)."""
    data = read_yaml(path, "endpoints file")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of role to a list of URLs")
    try:
        return EndpointsFile.model_validate(data)
    except ValidationError as exc:
        raise _first_error(path, exc) from None


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file; unreadable or malformed → one ConfigError line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text ({not_utf8(exc)})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"{path}: invalid YAML{line}: {problem}") from None


def read_task_list(path: Path) -> list[tuple[int, str]]:
    """Task ids with their line numbers; '#' comments and blank lines skipped, whitespace stripped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: task list not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read task list: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: task list is not UTF-8 text ({not_utf8(exc)})") from None
    out = []
    for number, raw in enumerate(lines, start=1):
        text = raw.split("#", 1)[0].strip()
        if text:
            out.append((number, text))
    return out


def _check_tasks(entries: list[tuple[str, str]], known: Callable[[str], bool]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for where, task in entries:
        if task in seen:
            raise ConfigError(f"{where}: duplicate task '{task}' (first at {seen[task]})")
        if not known(task):
            raise ConfigError(
                f"{where}: unknown task id '{task}' (not an MLE-bench competition nor a local one; "
                "see `run_paper.py --list`)"
            )
        seen[task] = where
    if not seen:
        raise ConfigError(f"{entries and entries[0][0] or 'tasks'}: the task list is empty")
    return tuple(seen)


def load_paper_config(path: Path, known_task: Callable[[str], bool]) -> PaperConfig:
    """Load paper.yaml (or a variant), resolve its task list and merge configuration defaults."""
    data = read_yaml(path, "config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        raw = PaperFile.model_validate(data)
    except ValidationError as exc:
        raise _first_error(path, exc) from None

    if isinstance(raw.tasks, str):
        task_file = (path.parent / raw.tasks).resolve()
        lines = read_task_list(task_file)
        if not lines:
            raise ConfigError(f"{task_file}: the task list is empty")
        tasks = _check_tasks([(f"{task_file}:{n}", t) for n, t in lines], known_task)
        source = str(task_file)
    else:
        if not raw.tasks:
            raise ConfigError(f"{path}: tasks: the task list is empty")
        tasks = _check_tasks([(f"{path}: tasks[{i}]", t) for i, t in enumerate(raw.tasks)], known_task)
        source = f"{path}:tasks"

    defaults = raw.world_model_defaults.model_dump()
    merged: dict[str, WorldModelSettings] = {}
    for name, entry in raw.configurations.items():
        if not NAME_RE.match(name):
            raise ConfigError(f"{path}: configurations.{name}: names use a-z, 0-9, '.', '_' and '-'")
        try:
            merged[name] = WorldModelSettings.model_validate({**defaults, **entry.world_model})
        except ValidationError as exc:
            raise _first_error(path, exc, f"configurations.{name}.world_model") from None

    return PaperConfig(
        path=path,
        name=raw.name,
        seeds=raw.seeds,
        tasks=tasks,
        tasks_source=source,
        regimes=raw.regimes,
        endpoints=raw.endpoints,
        serve=raw.serve,
        budget=raw.budget,
        search=raw.search,
        agent=raw.agent,
        stages=raw.stages,
        configurations=merged,
    )


def load_cluster_config(path: Path | None) -> ClusterConfig:
    """Load cluster.yaml; None or a missing default file gives the defaults."""
    if path is None:
        return ClusterConfig()
    data = read_yaml(path, "cluster config")
    if data is None:
        return ClusterConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise _first_error(path, exc) from None


def resolved_regime(config: PaperConfig, regime: Regime, configurations: tuple[str, ...]) -> dict[str, Any]:
    """The fully resolved config of one regime, as written to agent-config.yaml."""
    return {
        "name": config.name,
        "regime": regime,
        "source": str(config.path),
        "seeds": list(config.seeds),
        "tasks": list(config.tasks),
        "configurations": {
            name: config.agent_settings(name).model_dump(mode="json") for name in configurations
        },
    }


def regime_hash(config: PaperConfig, regime: Regime, configurations: tuple[str, ...]) -> str:
    """Hash of the science of one regime's sweep (endpoint transport fields excluded)."""
    return sweep_hash(
        regime, config.seeds, config.tasks, {n: config.agent_settings(n) for n in configurations}
    )
