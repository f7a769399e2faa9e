#!/usr/bin/env python3
"""Helper of serve_vllm.sh: per-role server defaults from the paper config, and the readiness wait.

Reads the `serve:` section of configs/paper.yaml (`serve: {coder: {model, port, gpus,
max_model_len, extra_args}, ...}`) or polls GET /v1/models; writes shell assignments or nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROLES = ("coder", "world", "feedback")
FIELDS = {"model": str, "port": int, "gpus": int, "max_model_len": int}


def defaults(config: Path, role: str) -> str:
    """Shell assignments `cfg_model=... cfg_port=... cfg_gpus=... cfg_max_model_len=... cfg_extra_args=(...)`."""
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise SystemExit(f"serve_config.py: cannot read {config}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SystemExit(f"serve_config.py: {config} is not valid YAML: {exc}") from exc
    section = (data.get("serve") or {}).get(role) if isinstance(data, dict) else None
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise SystemExit(f"serve_config.py: {config}: serve.{role} must be a mapping")
    unknown = set(section) - set(FIELDS) - {"extra_args"}
    if unknown:
        raise SystemExit(
            f"serve_config.py: {config}: unknown keys in serve.{role}: {', '.join(sorted(unknown))}"
        )
    lines = []
    for key, kind in FIELDS.items():
        value = section.get(key)
        if value is not None and not isinstance(value, kind):
            raise SystemExit(f"serve_config.py: {config}: serve.{role}.{key} must be a {kind.__name__}")
        lines.append(f"cfg_{key}={shlex.quote('' if value is None else str(value))}")
    extra = section.get("extra_args") or []
    if not isinstance(extra, list) or not all(isinstance(a, str | int | float) for a in extra):
        raise SystemExit(f"serve_config.py: {config}: serve.{role}.extra_args must be a list of strings")
    lines.append("cfg_extra_args=(" + " ".join(shlex.quote(str(a)) for a in extra) + ")")
    return "\n".join(lines)


def wait(url: str, timeout: float, pid: int | None, interval: float) -> int:
    """Poll `url` (…/v1/models) until it answers 200; 0 ready, 1 timeout, 3 the server process died."""
    headers = {}
    key = os.environ.get("VLLM_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    deadline = time.monotonic() + timeout
    while True:
        if pid is not None and not _alive(pid):
            return 3
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
                if response.status == 200:
                    body = json.loads(response.read() or b"{}")
                    ids = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
                    print(" ".join(str(i) for i in ids))
                    return 0
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return 1
        time.sleep(interval)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of the calling shell counts as dead
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="serve_config.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("defaults", help="print shell assignments for ROLE from the config")
    d.add_argument("role", choices=ROLES)
    d.add_argument("--config", type=Path, required=True)
    w = sub.add_parser("wait", help="wait until URL answers")
    w.add_argument("url")
    w.add_argument("--timeout", type=float, default=1800.0)
    w.add_argument("--pid", type=int)
    w.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args(argv)
    if args.command == "defaults":
        print(defaults(args.config, args.role))
        return 0
    return wait(args.url, args.timeout, args.pid, args.interval)


if __name__ == "__main__":
    sys.exit(main())
