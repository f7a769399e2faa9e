"""A run cannot poison the next run of its trial: what a script leaves where the sandbox's set-up makes
mount points (its /tmp, the workspace's dirs), then the next run and a resumed agent.

Reads nothing of the repo but its package and test helpers; writes a venv copied under /tmp (the
agent's interpreter under /tmp, as in a fresh clone there), trial dirs under /var/tmp (off /tmp, where
the workspace's tmp/ is bound on /tmp) and pytest's tmp paths.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import site as sysconfig_site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import coder_reply, make_competition, make_spec, review_responder
from fakeserver import FakeOpenAIServer

from mle_world.agent.sandbox.interpreter import ProcessRunner, child_environment
from mle_world.agent.sandbox.jail import build_jail
from mle_world.agent.sandbox.workspace import TrialLayout, set_up_trial_dir
from mle_world.records import AgentResult, BudgetSettings, SandboxSettings, SearchSettings

pytestmark = [
    pytest.mark.shared_setup,
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="the agent of a root launch of `process`: needs root"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

PLANTS = {
    "a dangling link": "os.symlink('/nonexistent', parent)",
    # During its set-up bubblewrap sees the host's root at /oldroot: it made `venv` there, as root.
    "a link to a host dir": "os.symlink('/oldroot' + canary, parent)",
    "a link to /": "os.symlink('/', parent)",
    "a link into the read-only root": "os.symlink('/newroot/etc', parent)",
    "a link loop": "os.symlink(parent, parent)",
    "a FIFO": "os.mkfifo(parent)",
    "a file": "open(parent, 'w').write('x')",
    "a link at the mount point": "os.mkdir(parent)\nos.symlink('/oldroot' + canary, shown)",
    "a FIFO at the mount point": "os.mkdir(parent)\nos.mkfifo(shown)",
    "a file at the mount point": "os.mkdir(parent)\nopen(shown, 'w').write('x')",
}
"""What a script leaves at a path of its /tmp where the next run's set-up makes a mount point (`shown`,
a path the sandbox shows read-only, such as the agent's venv) or its parent."""

PLANT = """
import os, shutil
parent, shown, canary = {parent!r}, {shown!r}, {canary!r}
# The set-up's own directories are root's, /tmp the script's: the top one is moved aside whole.
os.rename('/tmp/' + parent.split('/')[2], '/tmp/moved-by-the-script')
os.makedirs(os.path.dirname(parent), exist_ok=True)
{plant}
print('planted at', parent)
"""

LOOK = """
import json, os
shown, private = {shown!r}, {private!r}
seen = {{'shown': sorted(os.listdir(shown)), 'tmp': sorted(os.listdir('/tmp'))}}
seen['input'] = sorted(os.listdir('input'))
seen['private'] = [path for path in (private, '/oldroot' + private) if os.path.exists(path)]
print('look:', json.dumps(seen))
"""


@pytest.fixture(scope="module")
def outside_tmp() -> Iterator[Path]:
    """A directory off /tmp for the trial: under /tmp the sandbox mounts a fresh tmpfs on /tmp."""
    base = Path("/var/tmp")
    if not base.is_dir() or base.resolve().is_relative_to("/tmp"):
        pytest.skip("needs /var/tmp off /tmp")
    path = Path(tempfile.mkdtemp(prefix="mlew-poison-", dir=base))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def under_tmp() -> Iterator[Path]:
    """A directory right under /tmp, where the sandbox shows a path read-only (the agent's venv)."""
    path = Path(tempfile.mkdtemp(prefix="mlew-prefix-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _canary(root: Path) -> Path:
    canary = root / "canary"
    canary.mkdir(parents=True)
    (canary / "kept").write_text("host")
    return canary


def _looks(term_out: str) -> list[dict[str, list[str]]]:
    """What each run of a node saw as it started (a node's output may hold its debug run's too)."""
    return [json.loads(line[len("look: ") :]) for line in term_out.splitlines() if line.startswith("look: ")]


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_what_a_run_plants_under_tmp_cannot_break_or_steer_the_next_sandbox(
    plant: str, outside_tmp: Path, under_tmp: Path, tmp_path: Path
) -> None:
    """The workspace's tmp/ is bound on /tmp, and bubblewrap (with the agent's privileges) then made
    the mount points of what it shows under /tmp inside it, following what the last script left there:
    `Can't mkdir .../venv: No such file or directory` for every later run and resume (infra, retried),
    or a directory made in a host dir, or the venv mounted where the script chose."""
    root = Path(tempfile.mkdtemp(dir=outside_tmp))
    data = root / "data"
    data.mkdir()
    (data / "train.csv").write_text("id,y\n1,2\n")
    shown = under_tmp / plant.replace(" ", "-") / "venv"
    shown.mkdir(parents=True)
    (shown / "marker").write_text("shown")
    canary = _canary(root)
    layout = TrialLayout(root / "trial", data)
    set_up_trial_dir(layout)
    writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)

    def session() -> ProcessRunner:
        """What the agent does at its start (`build_runner`), with `shown` among the read-only paths."""
        set_up_trial_dir(layout)
        jail = build_jail(layout.workspace, data, SandboxSettings())
        jail = dataclasses.replace(jail, read_only=(*jail.read_only, str(shown)))
        jail.grant(writable)
        jail.probe(sys.executable, child_environment(layout.workspace, os.environ, tmpdir="/tmp"))
        return ProcessRunner(layout.workspace, jail=jail, writable=writable, kill_grace_s=1.0)

    private = root / "private"
    private.mkdir()
    (private / "answers.csv").write_text("id,y\n1,3\n")
    names = {"parent": str(shown.parent), "shown": str(shown), "canary": str(canary), "private": str(private)}
    planting = PLANT.format(plant=PLANTS[plant], **names)
    look = LOOK.format(**names)
    runner = session()
    for resumed in (False, True):
        planted = runner.run(planting, args=[], timeout_s=60, log_path=tmp_path / "plant.log")
        assert planted.ok and "planted at" in planted.term_out, planted.term_out
        if resumed:
            runner = session()  # the probe of a resumed agent (or of the retry) must pass too
        after = runner.run(look, args=[], timeout_s=60, log_path=tmp_path / "look.log")
        assert sorted(os.listdir(canary)) == ["kept"]  # nothing made in a host dir
        assert after.ok, after.term_out
        [seen] = _looks(after.term_out)
        assert seen["shown"] == ["marker"] and seen["input"] == ["train.csv"] and not seen["private"], seen
        assert "moved-by-the-script" not in seen["tmp"], seen  # each run's /tmp starts empty


WORKSPACE_PLANT = """
import os, shutil
canary = {canary!r}
# The workspace's own dirs: tmp/ as a link to a host dir (the next run's /tmp and /dev/shm, bound with
# the agent's privileges), working/ as a FIFO, submission/ as a link, runfile.py as a directory.
os.rename('tmp', 'tmp-moved-' + os.urandom(4).hex())
os.symlink(canary, 'tmp')
shutil.rmtree('working')
os.mkfifo('working')
shutil.rmtree('submission')
os.symlink(canary, 'submission')
try:  # the data view, for every later run
    os.rename('input', 'input-moved')
except OSError as error:
    print('input stays:', error)
print('planted the workspace')
"""


def _venv_under(directory: Path) -> Path:
    """A venv of copies (not links into /usr) under `directory` that imports this checkout's packages."""
    venv = directory / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--copies", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python3"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = [*sysconfig_site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    lines = "".join(f"import site; site.addsitedir({path!r})\n" for path in ours)
    Path(site, "mlew-checkout.pth").write_text(lines)
    return python


def _run_agent(python: Path, spec_path: Path) -> tuple[int, str]:
    proc = subprocess.Popen(
        [str(python), "-m", "mle_world.agent", "--spec", str(spec_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, err.decode(errors="replace")


def test_a_trial_whose_scripts_poison_every_set_up_path_proceeds_and_resumes(
    outside_tmp: Path, under_tmp: Path
) -> None:
    """A real trial whose agent's venv lies under /tmp (a fresh clone there) and whose trial dir does
    not: each step's script plants one thing of PLANTS (and last the workspace's own dirs), each next
    run and then a resumed agent must go on as usual, see the venv, and write nothing outside."""
    python = _venv_under(under_tmp / "clone")
    prefix = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    root = Path(tempfile.mkdtemp(dir=outside_tmp))
    root.chmod(0o755)
    public, private = make_competition(root / "competition")
    canary = _canary(root)
    names = {
        "parent": str(Path(prefix).parent),
        "shown": prefix,
        "canary": str(canary),
        "private": str(private),
    }
    look = LOOK.format(**names)
    # Each script first looks at what its run was given, then plants for the next run.
    scripts = [look + PLANT.format(plant=PLANTS[name], **names) for name in sorted(PLANTS)]
    scripts.append(look + WORKSPACE_PLANT.format(**names))
    search = SearchSettings(num_drafts=len(scripts) + 2, debug_prob=0.0)
    coder = FakeOpenAIServer(model="fake-coder", default=coder_reply(look))
    feedback = FakeOpenAIServer(model="fake-feedback", default=review_responder)
    with coder, feedback:
        coder.push(*(coder_reply(script) for script in scripts))
        for steps in (len(scripts), len(scripts) + 2):  # then resumed, with two steps more
            budget = BudgetSettings(
                time_limit_s=600, max_steps=steps, exec_timeout_s=60, debug_timeout_s=30, min_step_s=0
            )
            spec = make_spec(
                root, public, {"coder": coder, "feedback": feedback}, budget=budget, search=search
            )
            trial = Path(spec.paths.trial_dir)
            code, err = _run_agent(python, trial / "spec.json")
            result = AgentResult.model_validate_json((trial / "result.json").read_text())
            assert code == 0 and result.status == "completed", (result, err[-3000:])
            assert result.steps == steps, result
    journal = json.loads((trial / "journal.json").read_text())
    outputs = [node["term_out"] for node in journal["nodes"]]
    assert len(outputs) == len(scripts) + 2
    venv, data = sorted(os.listdir(prefix)), sorted(os.listdir(public))
    for output in outputs:
        assert "Traceback" not in output and "sandbox" not in output, output
        looks = _looks(output)
        assert looks and all(seen["shown"] == venv for seen in looks), output
        assert all(seen["input"] == data and not seen["private"] for seen in looks), output
        # /tmp starts empty each run: not the host dir tmp/ was linked to, nor what a script moved.
        assert all(not {"kept", "moved-by-the-script"} & set(seen["tmp"]) for seen in looks), output
    assert sum("planted" in output for output in outputs) == len(scripts), outputs
    assert sorted(os.listdir(canary)) == ["kept"]
