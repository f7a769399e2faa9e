#!/usr/bin/env python3
"""Helper of the serve scripts: per-role server defaults, the readiness wait, and the endpoints file.

Reads the `serve:` section of configs/paper.yaml (`serve: {coder: {model, port, gpus,
max_model_len, extra_args}, ...}`), polls GET /v1/models or checks a port; writes shell assignments, or adds and
removes a replica's URL in an endpoints file (`{coder: [url, ...], feedback: [...], world: [...]}`,
read by `run_paper.py --endpoints-file`), under an exclusive lock on FILE.lock.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import socket
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


def wait(url: str, timeout: float, pid: int | None, interval: float, expect: str | None = None) -> int:
    """Poll `url` (…/v1/models) until it answers 200; 0 ready, 1 timeout, 3 the server process died,
    4 the port answers for other models than `expect` (another server holds the port)."""
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
                    ids = [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]
                    print(" ".join(ids))
                    return 0 if expect is None or expect in ids else 4
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return 1
        time.sleep(interval)


def port_in_use(host: str, port: int) -> bool:
    """Something already accepts connections on host:port (a server another job or user started)."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _locked(path: Path):  # type: ignore[no-untyped-def]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _read_endpoints(path: Path) -> dict[str, list[str]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"serve_config.py: cannot read endpoints file {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(
        r in ROLES and isinstance(v, list) and all(isinstance(u, str) for u in v) for r, v in data.items()
    ):
        raise SystemExit(
            f"serve_config.py: {path}: expected {{role: [url, ...]}} with roles {', '.join(ROLES)}"
        )
    return data


def update_endpoints(path: Path, role: str, url: str, add: bool) -> None:
    """Add (once) or remove `url` in the role's list; the file is replaced atomically."""
    with _locked(path):
        data = _read_endpoints(path)
        urls = [u for u in data.get(role, []) if u != url]
        if add:
            urls.append(url)
        if urls:
            data[role] = urls
        else:
            data.pop(role, None)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump({r: data[r] for r in ROLES if r in data}, default_flow_style=False))
        os.replace(tmp, path)


def wait_endpoints(path: Path, counts: dict[str, int], timeout: float, interval: float) -> int:
    """Wait until every role in `counts` has that many URLs in the file; 0 ready, 1 timeout."""
    deadline = time.monotonic() + timeout
    while True:
        with _locked(path):
            data = _read_endpoints(path)
        if all(len(data.get(role, [])) >= n for role, n in counts.items()):
            for role in counts:
                print(f"{role}: {', '.join(data[role])}")
            return 0
        if time.monotonic() >= deadline:
            have = ", ".join(f"{role} {len(data.get(role, []))}/{n}" for role, n in counts.items())
            print(
                f"serve_config.py: {path}: not all replicas ready after {timeout:.0f}s ({have})",
                file=sys.stderr,
            )
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
    w.add_argument("--expect", help="the model id the server must list (else exit 4)")
    pu = sub.add_parser("port-in-use", help="exit 0 if something accepts connections on HOST:PORT, else 1")
    pu.add_argument("host")
    pu.add_argument("port", type=int)
    for name in ("register", "unregister"):
        e = sub.add_parser(
            name, help="add (register) or remove (unregister) a replica's URL in an endpoints file"
        )
        e.add_argument("file", type=Path)
        e.add_argument("role", choices=ROLES)
        e.add_argument("url")
    we = sub.add_parser("wait-endpoints", help="wait until the endpoints file lists ROLE=N replicas")
    we.add_argument("file", type=Path)
    we.add_argument("counts", nargs="+", help="ROLE=N")
    we.add_argument("--timeout", type=float, default=1800.0)
    we.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args(argv)
    if args.command == "defaults":
        print(defaults(args.config, args.role))
        return 0
    if args.command in ("register", "unregister"):
        update_endpoints(args.file, args.role, args.url, add=args.command == "register")
        return 0
    if args.command == "wait-endpoints":
        counts = {}
        for item in args.counts:
            role, _, n = item.partition("=")
            if role not in ROLES or not n.isdigit():
                parser.error(f"expected ROLE=N with ROLE in {', '.join(ROLES)}, got {item}")
            counts[role] = int(n)
        return wait_endpoints(args.file, counts, args.timeout, args.interval)
    if args.command == "port-in-use":
        return 0 if port_in_use(args.host, args.port) else 1
    return wait(args.url, args.timeout, args.pid, args.interval, args.expect)


if __name__ == "__main__":
    sys.exit(main())
