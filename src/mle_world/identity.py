"""What makes two trials or two sweeps the same experiment: the science hashes, and the output dir's mark.

Hashes the science of agent settings (endpoint transport fields excluded); reads and writes
`<output_dir>/.sweep-identity`; compares launches' provenance (code, served models, image; launch.json).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_world import layout
from mle_world.errors import UserError
from mle_world.records import AgentSettings, LaunchProvenance, LaunchRecord, Regime
from mle_world.storage import Unreadable, load_record, read_text, write_json_atomic

HASH_SCHEME = "v2"
"""v2: step limit counts executions, context budget, seeds, metric direction (issue 12)."""
TRANSPORT_FIELDS = ("url", "key_env", "timeout_s", "outage_window_s", "max_concurrent")
"""Endpoint fields that do not change results; excluded from every science hash."""


def science_of(settings: AgentSettings) -> dict[str, Any]:
    """The agent settings with transport-only endpoint fields removed (what identity hashes see)."""
    data = settings.model_dump(mode="json")
    for endpoint in data["endpoints"].values():
        for key in TRANSPORT_FIELDS:
            endpoint.pop(key, None)
        # Constrained decoding changes what the model writes (science), but off it is left out, so
        # the sweeps made before the setting existed keep their identity.
        if endpoint.get("structured_output") == "none":
            del endpoint["structured_output"]
    return data


def stable_hash(data: Any, length: int = 16) -> str:
    """sha256 of canonical JSON, truncated; stable across runs and machines."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def trial_hash(
    regime: Regime,
    configuration: str,
    task: str,
    seed: int,
    settings: AgentSettings,
    lower_is_better: bool | None = None,
) -> str:
    """A trial's science hash (spec.json's `science_hash`); a known metric direction is part of it."""
    return TrialHasher.of(settings)(regime, configuration, task, seed, lower_is_better)


@dataclass(frozen=True)
class TrialHasher:
    """`trial_hash` for the trials of one configuration's settings, their canonical JSON made once: in
    a plan of 2,380 trials, dumping and encoding the same settings per trial was 0.08 s of 0.3."""

    agent_json: str
    """`science_of(settings)` as `stable_hash` encodes it."""

    @classmethod
    def of(cls, settings: AgentSettings) -> TrialHasher:
        return cls(json.dumps(science_of(settings), sort_keys=True, separators=(",", ":")))

    def __call__(
        self, regime: Regime, configuration: str, task: str, seed: int, lower_is_better: bool | None = None
    ) -> str:
        rest = {
            "scheme": HASH_SCHEME,
            "regime": regime,
            "configuration": configuration,
            "task": task,
            "seed": seed,
            **({} if lower_is_better is None else {"lower_is_better": lower_is_better}),
        }
        # `stable_hash` of the same object with "agent" in it: sorted, "agent" is its first key.
        text = (
            '{"agent":' + self.agent_json + "," + json.dumps(rest, sort_keys=True, separators=(",", ":"))[1:]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def sweep_hash(
    regime: Regime, seeds: Sequence[int], tasks: Sequence[str], configurations: Mapping[str, AgentSettings]
) -> str:
    """Hash of the science of one regime's sweep (the output dir's identity)."""
    return stable_hash(
        {
            "regime": regime,
            "seeds": list(seeds),
            "tasks": list(tasks),
            "configurations": {name: science_of(s) for name, s in configurations.items()},
        },
        length=64,
    )


def check_sweep_identity(output_dir: Path, config_hash: str, regime: Regime | None = None) -> None:
    """Refuse an output dir that holds a sweep of another science config.

    The reference hash is `<output_dir>/.sweep-identity`, written by `record_sweep_identity` when a real
    sweep starts (never by dry runs, and separate from launch.json, which every launch rewrites)."""
    path = layout.OutputFiles(output_dir).sweep_identity
    try:
        recorded = json.loads(read_text(path))
        previous = recorded["config_hash"]
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(
            f"{path}: unreadable; remove it only if {output_dir} holds no trials you want"
        ) from None
    if previous != config_hash and regime is not None and recorded.get("regime") not in (None, regime):
        # The likeliest slip: the second regime's command pointed at the first one's output dir.
        raise UserError(
            f"--output-dir {output_dir}: holds the {recorded['regime']} sweep, this is --regime {regime}; "
            "use a new --output-dir for each regime"
        )
    if previous != config_hash:
        raise UserError(
            f"--output-dir {output_dir}: holds a sweep of another science config "
            f"(hash {previous[:12]}, this one {config_hash[:12]}: the config's science, -i or a --ROLE-model "
            "differs); use a new --output-dir"
        )


def record_sweep_identity(output_dir: Path, config_hash: str, regime: Regime) -> None:
    """Mark the output dir with its sweep's hash, once (the first real launch)."""
    path = layout.OutputFiles(output_dir).sweep_identity
    if not path.exists():
        write_json_atomic(path, {"config_hash": config_hash, "regime": regime})


ALLOW_PROVENANCE_FLAG = "--allow-provenance-change"


def _short(value: str | None) -> str:
    return "none" if value is None else value[:12]


def _code(p: LaunchProvenance) -> str:
    if p.git_sha is None and p.package_sha256 is not None:
        return f"installed copy {_short(p.package_sha256)}"
    if p.git_dirty:
        return f"{_short(p.git_sha)} with uncommitted changes {_short(p.git_diff_sha256)}"
    return _short(p.git_sha)


def provenance_changes(old: LaunchProvenance, new: LaunchProvenance) -> list[str]:
    """What differs between two launches' provenance, one phrase each (empty when nothing does).

    Served models are compared per role, and only when both launches probed that role."""
    changes = []
    if old.harness_version != new.harness_version:
        changes.append(f"harness {old.harness_version} -> {new.harness_version}")
    code = ("git_sha", "git_dirty", "git_diff_sha256", "package_sha256")
    if any(getattr(old, name) != getattr(new, name) for name in code):
        changes.append(f"code {_code(old)} -> {_code(new)}")

    def by_role(p: LaunchProvenance) -> dict[str, set[str]]:
        roles: dict[str, set[str]] = {}
        for item in p.served_models:
            role, _, model = item.partition("=")
            roles.setdefault(role, set()).add(model)
        return roles

    before, after = by_role(old), by_role(new)
    for role in sorted(before.keys() & after.keys()):
        if before[role] != after[role]:
            changes.append(
                f"{role} model {','.join(sorted(before[role]))} -> {','.join(sorted(after[role]))}"
            )
    data_before = dict(item.partition("=")[::2] for item in old.data_manifests)
    data_after = dict(item.partition("=")[::2] for item in new.data_manifests)
    for task in sorted(data_before.keys() & data_after.keys()):
        if data_before[task] != data_after[task]:
            changes.append(f"{task} data {data_before[task][:12]} -> {data_after[task][:12]}")
    if old.image_sha256 != new.image_sha256:
        changes.append(f"image sha256 {_short(old.image_sha256)} -> {_short(new.image_sha256)}")
    # Compared when both launches graded with MLE-bench (a launch without --grade records none).
    if old.mlebench_version and new.mlebench_version and old.mlebench_version != new.mlebench_version:
        changes.append(f"MLE-bench {old.mlebench_version} -> {new.mlebench_version}")
    return changes


def previous_launch(path: Path) -> LaunchRecord | None:
    """An output dir's launch.json (`path`) when an earlier real launch wrote it; None when there is none
    (or only a dry run's). UserError when it cannot be read: written by another harness version, or corrupt."""
    record = load_record(path, LaunchRecord)
    if isinstance(record, Unreadable):
        if record.missing:
            return None
        if isinstance(record.error, OSError):
            raise UserError(f"{path}: unreadable ({record.reason})")
        raise UserError(f"{path}: {unreadable_launch(record)}")
    return None if record.dry_run else record


def unreadable_launch(failed: Unreadable) -> str:
    """Why launch.json (read, but no launch record) could not be used, in one phrase (the writing
    harness's version when it says)."""
    from mle_world import __version__

    try:
        version = json.loads(read_text(failed.path)).get("harness_version")
    except (OSError, ValueError, AttributeError):
        version = None
    where = "file"
    if isinstance(failed.error, ValidationError):
        where = ".".join(str(part) for part in failed.error.errors()[0]["loc"]) or where
    written = f"written by harness {version}, this is {__version__}" if version else "not a launch record"
    return f"{written}; {where}: {failed.reason}"


def check_provenance(path: Path, record: LaunchRecord, allow: bool) -> list[str]:
    """Refuse a launch whose code, served models, image, data or MLE-bench differ from the earlier real launch recorded
    in `path` (launch.json; the trials' numbers would mix into one table); with `allow`, return what
    changed instead."""
    if record.dry_run:
        return []
    try:
        previous = previous_launch(path)
    except UserError as exc:
        if not allow:
            raise UserError(
                f"{exc}; use a new --output-dir, or {ALLOW_PROVENANCE_FLAG} to replace it"
            ) from None
        return [f"earlier launch.json unreadable ({exc})"]
    if previous is None:
        return []
    changes = provenance_changes(latest_known(previous), record.provenance())
    if changes and not allow:
        raise UserError(
            f"--output-dir {path.parent}: its earlier launch ran with other settings ({'; '.join(changes)}); "
            f"use a new --output-dir, or {ALLOW_PROVENANCE_FLAG} to continue it (launch.json keeps both; "
            "the audit flags the mix)"
        )
    return changes


def latest_known(record: LaunchRecord) -> LaunchProvenance:
    """The record's provenance with each role's served models, each task's data and the MLE-bench that
    graded as the latest launch that knew them saw them: a launch without a probe (`--no-endpoint-check`),
    of other tasks or without --grade leaves the earlier ones' values standing, so the next launch is
    compared with them."""
    served: dict[str, list[str]] = {}
    data: dict[str, str] = {}
    grader: str | None = None
    for launch in (*record.earlier_launches, record.provenance()):
        roles: dict[str, list[str]] = {}
        for item in launch.served_models:
            roles.setdefault(item.partition("=")[0], []).append(item)
        served.update(roles)
        data.update(item.partition("=")[::2] for item in launch.data_manifests)
        grader = launch.mlebench_version or grader
    return record.provenance().model_copy(
        update={
            "served_models": tuple(sorted(i for items in served.values() for i in items)),
            "data_manifests": tuple(f"{task}={digest}" for task, digest in sorted(data.items())),
            "mlebench_version": grader,
        }
    )


def mixed_provenance(record: LaunchRecord) -> list[str]:
    """What differs among the launches launch.json records (the earlier ones against the latest)."""
    latest = record.provenance()
    changes: list[str] = []
    for earlier in record.earlier_launches:
        for change in provenance_changes(earlier, latest):
            if change not in changes:
                changes.append(change)
    return changes
