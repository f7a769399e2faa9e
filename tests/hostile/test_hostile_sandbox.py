"""Attacks on the inner sandbox's own machinery, run by the real agent code in both runtimes.

Reads nothing of the repo but its package; compiles a small shared library with the host's C compiler
(skipped without one), writes under pytest's tmp paths. Each test runs a driver (the agent's real
ProcessRunner and jail, as the agent builds them) on the host, as for `--runtime process` launched by
root, and inside the real Enroot container of the CI image as root, with hostile scripts in a row.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="the agent of a root launch: needs root"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

AGENT_ENV_LD_LIBRARY_PATH = "/usr/local/cuda/lib64:"
"""What `export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH` leaves when it was unset (in a
launcher's shell, or an image's ENV): its empty entry is the current directory to the dynamic loader."""

SHIM = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
/* Loaded in place of libcap-ng (whose real copy it names as a dependency, so the program still works):
   records who loaded it, with which credentials, in the workspace. */
__attribute__((constructor)) static void owned(void) {
    char status[8192], name[512];
    int in = open("/proc/self/status", O_RDONLY);
    ssize_t n = in < 0 ? 0 : read(in, status, sizeof status);
    snprintf(name, sizeof name, "%s/owned-%d", OWNED_DIR, (int)getpid());
    int out = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0 && n > 0) write(out, status, (size_t)n);
}
"""

DRIVER = r"""
import glob, json, os, shutil, subprocess, sys
from pathlib import Path
from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import build_jail
from mle_world.agent.sandbox.workspace import TrialLayout, set_up_trial_dir
from mle_world.records import SandboxSettings

root = Path(sys.argv[1])
scripts = json.loads((root / "scripts.json").read_text())
data = root / "data"
data.mkdir(exist_ok=True)
(data / "train.csv").write_text("id,y\n1,2\n")
layout = TrialLayout(root / "trial", data)
set_up_trial_dir(layout)
ws = layout.workspace


def owned():
    found = {}
    for path in sorted(glob.glob(f"{ws}/owned-*")):
        found[path] = [l for l in open(path).read().splitlines() if l.startswith(("Uid", "CapEff", "Seccomp:"))]
        os.unlink(path)
    return found


# Control: the planted library is what this node's setpriv loads from a search path naming its directory.
shim = root / "shim"
setpriv = shutil.which("setpriv")
subprocess.run([setpriv, "--no-new-privs", "true"], env={"LD_LIBRARY_PATH": str(shim)}, check=True)
control = owned()
# The agent's own environment (os.environ) reaches its runs as it does in a trial.
jail = build_jail(ws, layout.data_dir, SandboxSettings(disk_mb=64))
writable = (ws, layout.working, layout.tmp, layout.run_submission_dir)
runner = ProcessRunner(ws, jail=jail, writable=writable, output_limit=1 << 16)
outputs = []
for index, code in enumerate(scripts):
    result = runner.run(code, args=[], timeout_s=60, log_path=root / f"run-{index}.log")
    outputs.append({"ok": result.ok, "term_out": result.term_out, "exc_type": result.exc_type})
print(json.dumps({"control": control, "runs": outputs, "owned": owned()}))
"""

PLANT = r"""
import base64, glob
# A library the sandbox's own steps load (util-linux's setpriv), beside the real one it forwards to.
real = sorted(glob.glob("/usr/lib/*/libcap-ng.so.0") + glob.glob("/lib/*/libcap-ng.so.0"))[0]
open("libcap-ng-real.so.0", "wb").write(open(real, "rb").read())
open("libcap-ng.so.0", "wb").write(base64.b64decode("{shim}"))
print("planted beside", real)
"""

AFTER_PLANT = r"""
import ctypes, os
print("the next run: nothing of the sandbox's machinery ran the planted library")
# Each fanotify group is counted per host uid (128): for a script of Enroot started by root, root's.
libc = ctypes.CDLL(None, use_errno=True)
groups = []
while len(groups) < 200:
    fd = libc.syscall({fanotify_init}, 0x200, os.O_RDONLY)  # FAN_CLASS_NOTIF | FAN_REPORT_FID
    if fd < 0:
        print("fanotify_init:", os.strerror(ctypes.get_errno()))
        break
    groups.append(fd)
print("fanotify groups", len(groups))
"""

CORE = r"""
import ctypes, os, resource
# At RLIMIT_CORE 1 the kernel starts no core_pattern pipe helper (systemd-coredump, apport: root on the
# host); at any other value, 0 included, every crash of the script does. Lowering needs no privilege.
print("core limit before", resource.getrlimit(resource.RLIMIT_CORE))
try:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 1))
    print("setrlimit: lowered")
except (OSError, ValueError) as error:
    print("setrlimit:", error)
# prlimit64 with the new limit at a 4 GiB boundary: the low half of the pointer is 0, as NULL's is.
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
page = libc.mmap(ctypes.c_void_p(0x7E0000000000), 4096, 3, 0x22 | 0x100000, -1, 0)
if page not in (None, ctypes.c_void_p(-1).value):
    ctypes.memset(page, 0, 16)
    rc = libc.syscall({prlimit64}, 0, resource.RLIMIT_CORE, ctypes.c_void_p(page), None)
    print("prlimit64:", rc, os.strerror(ctypes.get_errno()) if rc else "lowered")
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print("nofile lowered", resource.getrlimit(resource.RLIMIT_NOFILE)[0])
print("core limit after", resource.getrlimit(resource.RLIMIT_CORE))
"""

FANOTIFY_INIT = {"x86_64": 300, "aarch64": 262}
PRLIMIT64 = {"x86_64": 302, "aarch64": 261}


def build_shim(directory: Path, owned_dir: str) -> bytes:
    """The planted library, linked against a stand-in named like the real copy the script plants."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the planted library")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "shim.c").write_text(SHIM)
    (directory / "empty.c").write_text("")
    stub = directory / "stub"
    stub.mkdir()
    flags = ["-shared", "-fPIC"]
    subprocess.run(
        [compiler, *flags, "-o", str(stub / "libcap-ng-real.so.0"), "-Wl,-soname,libcap-ng-real.so.0"]
        + [str(directory / "empty.c")],
        check=True,
    )
    shim = directory / "libcap-ng.so.0"
    subprocess.run(
        [compiler, *flags, f'-DOWNED_DIR="{owned_dir}"', "-o", str(shim), "-Wl,-soname,libcap-ng.so.0"]
        + [str(directory / "shim.c"), "-Wl,--no-as-needed", f"-L{stub}", "-l:libcap-ng-real.so.0"],
        check=True,
    )
    return shim.read_bytes()


def prepare(host_root: Path, inner_root: str) -> None:
    """The driver's input under `host_root`, which the driver sees as `inner_root`."""
    machine = os.uname().machine
    if machine not in FANOTIFY_INIT:
        pytest.skip(f"the syscall filter is not installed on {machine}")
    host_root.mkdir(parents=True, exist_ok=True)
    host_root.chmod(0o755)
    shim = build_shim(host_root / "build", f"{inner_root}/trial/workspace")
    (host_root / "shim").mkdir()
    (host_root / "shim" / "libcap-ng.so.0").write_bytes(shim)
    real = next(p for p in (Path("/usr/lib"), Path("/lib")) if list(p.glob("*/libcap-ng.so.0")))
    shutil.copy(next(real.glob("*/libcap-ng.so.0")), host_root / "shim" / "libcap-ng-real.so.0")
    scripts = [
        PLANT.replace("{shim}", base64.b64encode(shim).decode()),
        AFTER_PLANT.replace("{fanotify_init}", str(FANOTIFY_INIT[machine])),
        CORE.replace("{prlimit64}", str(PRLIMIT64[machine])),
    ]
    (host_root / "scripts.json").write_text(json.dumps(scripts))


def check(report: dict[str, Any]) -> None:
    # The control shows the planted library works on this node (else the test would prove nothing).
    assert report["control"], "setpriv did not load the planted library from its search path"
    runs = report["runs"]
    assert all(run["ok"] for run in runs), runs
    assert "planted beside" in runs[0]["term_out"]
    # Before the fix the sandbox's setpriv ran it: as host root with every capability where the agent
    # is root (`process` launched by root), with all capabilities of its namespace and no syscall
    # filter yet under Enroot.
    assert report["owned"] == {}, report["owned"]
    out = runs[1]["term_out"]
    assert "fanotify groups 0" in out and "Too many open files" in out, out
    out = runs[2]["term_out"]
    assert "core limit after (1, 1)" in out and "prlimit64: -1 Operation not permitted" in out, out
    assert "nofile lowered 256" in out, out  # the other limits stay the script's to lower


def test_a_planted_library_and_fanotify_in_the_process_runtime(tmp_path: Path) -> None:
    root = tmp_path / "hostile"
    prepare(root, str(root))
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": AGENT_ENV_LD_LIBRARY_PATH}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_planted_library_and_fanotify_in_enroot(tmp_path: Path, ci_image: Path) -> None:
    """The agent inside `enroot start` as root. Enroot clears the launcher's environment: the value
    reaches the agent as a name of `container.env` (`-e NAME`, as the launcher renders it) or from an
    image's ENV, where `ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH` leaves the same."""
    inner = "/home/hostile"
    root = tmp_path / "hostile"
    prepare(root, inner)
    env = {
        "PATH": os.environ["PATH"],
        "ENROOT_MOUNT_HOME": "no",
        "LD_LIBRARY_PATH": AGENT_ENV_LD_LIBRARY_PATH,
    }
    for name in ("RUNTIME", "CACHE", "DATA", "TEMP"):
        env[f"ENROOT_{name}_PATH"] = str(tmp_path / "enroot" / name.lower())
    argv = ["enroot", "start", "-e", "LD_LIBRARY_PATH", "-m", f"{root}:{inner}", str(ci_image)]
    argv += ["sh", "-c", f'cd {inner} && exec python3 -c "$0" {inner}', DRIVER]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(json.loads(proc.stdout.strip().splitlines()[-1]))
