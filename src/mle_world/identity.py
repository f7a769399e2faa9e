"""What makes two trials or two sweeps the same experiment: the science hashes, and the output dir's mark.

Hashes the science of agent settings (endpoint transport fields excluded); reads and writes
`<output_dir>/.sweep-identity`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mle_world.errors import UserError
from mle_world.records import AgentSettings, Regime
from mle_world.storage import write_json_atomic

HASH_SCHEME = "v2"
"""v2: step limit counts executions, context budget, seeds, metric direction (issue 12)."""
TRANSPORT_FIELDS = ("url", "key_env", "timeout_s", "outage_window_s", "max_concurrent")
"""Endpoint fields that do not change results; excluded from every science hash."""
IDENTITY_FILE = ".sweep-identity"


def science_of(settings: AgentSettings) -> dict[str, Any]:
    """The agent settings with transport-only endpoint fields removed (what identity hashes see)."""
    data = settings.model_dump(mode="json")
    for endpoint in data["endpoints"].values():
        for key in TRANSPORT_FIELDS:
            endpoint.pop(key, None)
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
    return stable_hash(
        {
            "scheme": HASH_SCHEME,
            "regime": regime,
            "configuration": configuration,
            "task": task,
            "seed": seed,
            "agent": science_of(settings),
            **({} if lower_is_better is None else {"lower_is_better": lower_is_better}),
        }
    )


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


def check_sweep_identity(output_dir: Path, config_hash: str) -> None:
    """Refuse an output dir that holds a sweep of another science config.

    The reference hash is `<output_dir>/.sweep-identity`, written by `record_sweep_identity` when a real
    sweep starts (never by dry runs, and separate from launch.json, which every launch rewrites)."""
    path = output_dir / IDENTITY_FILE
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))["config_hash"]
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(
            f"{path}: unreadable; remove it only if {output_dir} holds no trials you want"
        ) from None
    if previous != config_hash:
        raise UserError(
            f"--output-dir {output_dir}: holds a sweep of another science config "
            f"(hash {previous[:12]}, this one {config_hash[:12]}); use a new --output-dir"
        )


def record_sweep_identity(output_dir: Path, config_hash: str, regime: Regime) -> None:
    """Mark the output dir with its sweep's hash, once (the first real launch)."""
    path = output_dir / IDENTITY_FILE
    if not path.exists():
        write_json_atomic(path, {"config_hash": config_hash, "regime": regime})
