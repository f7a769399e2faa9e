"""Entry point inside the container: `python -m mle_world.agent --spec PATH/spec.json`.

Reads spec.json and the endpoint key variables; writes the trial dir's agent outputs (never status.json).
Exit codes: 0 completed, 1 failed (see result.json), 2 bad spec/checkpoint, 143 preempted, 130 Ctrl-C,
75 another live agent holds this trial's journal (nothing touched).
A trial given GPUs checks them first (agent/gpu.py); an unusable GPU fails it as `infra` at once.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import random
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from pydantic import ValidationError

from mle_world.agent.budget import MonotonicClock
from mle_world.agent.events import EventLog
from mle_world.agent.gpu import GpuUnusableError, check_gpu, gpus_given
from mle_world.agent.journal import CorruptJournal
from mle_world.agent.llm.client import Backoff, EndpointClient
from mle_world.agent.llm.downtime import Downtime
from mle_world.agent.llm.redaction import RedactingFilter, Redactor
from mle_world.agent.loop import Agent, CheckpointMismatch, Preempted, Services
from mle_world.agent.sandbox.interpreter import ProcessRunner, child_environment
from mle_world.agent.sandbox.jail import Jail, SandboxUnavailable, build_jail
from mle_world.agent.sandbox.process_tree import enable_subreaper, kill_leftovers
from mle_world.agent.sandbox.workspace import TrialLayout, set_up_trial_dir
from mle_world.layout import TrialFiles
from mle_world.records import SPEC_VERSION, AgentResult, GpuInfo, TrialSpec
from mle_world.storage import Unreadable, load_record, write_model

log = logging.getLogger("mle_world.agent")
JOURNAL_BUSY = 75
"""Exit code when another live agent holds the journal (EX_TEMPFAIL): this one must not resume it."""


def _configure_logging(path: Path, redactor: Redactor) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setFormatter(fmt)
    file_handler.addFilter(RedactingFilter(redactor))
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(fmt)
    stream.addFilter(RedactingFilter(redactor))
    root = logging.getLogger("mle_world")
    root.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.addHandler(stream)


def _install_signal_handlers() -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        # A second signal while checkpointing must not interrupt the checkpoint.
        for sig in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise Preempted(signum, 130 if signum == signal.SIGINT else 143)

    for sig in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT):
        signal.signal(sig, handler)


def key_redactor(spec: TrialSpec) -> Redactor:
    """The endpoint keys this agent holds, to be redacted from whatever it stores or sends."""
    return Redactor.from_environment((e.key_env for e in spec.agent.endpoints.values()), os.environ)


def build_runner(
    spec: TrialSpec, layout: TrialLayout, redactor: Redactor, kill_grace_s: float
) -> ProcessRunner:
    """The script runner: inside the inner sandbox (probed once here) unless the spec turns it off."""
    set_up_trial_dir(layout)
    jail: Jail | None = None
    if spec.sandbox.enabled:
        jail = build_jail(layout.workspace, layout.data_dir, spec.sandbox)
        writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)
        jail.grant(writable)
        jail.probe(sys.executable, child_environment(layout.workspace, os.environ, tmpdir="/tmp"))
        log.debug("inner sandbox: uid %s, network %s", jail.drop_to or "(own)", spec.sandbox.network)
    else:
        log.warning("no inner sandbox: generated code runs as the agent, with the agent's view and rights")
    return ProcessRunner(
        layout.workspace,
        kill_grace_s=kill_grace_s,
        seed=spec.seed,
        jail=jail,
        output_limit=spec.sandbox.output_kb << 10,
        redactor=redactor,
        writable=(layout.workspace, layout.working, layout.tmp, layout.run_submission_dir),
    )


def hold_journal(layout: TrialLayout) -> int | None:
    """flock the trial's journal lock for this process's life (the fd stays open and is not
    inherited by generated scripts); None when another live agent holds it."""
    fd = os.open(layout.journal_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def build_agent(spec: TrialSpec, *, backoff: Backoff | None = None, kill_grace_s: float = 5.0) -> Agent:
    """Wire the real implementations: endpoint clients, process runner, monotonic clock, event log."""
    layout = TrialLayout(Path(spec.paths.trial_dir), Path(spec.paths.data_dir))
    if layout.workspace.exists():
        stale = kill_leftovers(layout.workspace)
        if stale:
            log.warning("killed %d process(es) left in the workspace by an earlier session", len(stale))
    runner = build_runner(spec, layout, key_redactor(spec), kill_grace_s)
    events = EventLog(layout.events)
    clock = MonotonicClock()
    downtime = Downtime(clock, events)
    clients = {
        role: EndpointClient(
            role,
            settings,
            events,
            backoff=backoff,
            rng=random.Random(f"{spec.seed}:{role}"),
            outages=downtime,
        )
        for role, settings in spec.agent.endpoints.items()
    }
    world_needed = spec.agent.world_model.enabled
    services = Services(
        coder=clients["coder"],
        feedback=clients.get("feedback", clients["coder"]),
        world=clients.get("world") if world_needed else None,
        runner=runner,
        clock=clock,
        events=events,
        downtime=downtime,
        llm_time=lambda: events.llm_time_s,
        gpu=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )
    return Agent(spec, layout, services)


def spec_problem(path: Path, error: ValidationError) -> str:
    """One line for a spec.json this agent cannot read; the launcher (the host's harness) may be another
    version than the agent (the image's), which an unknown field or another spec_version shows."""
    from mle_world import __version__

    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "spec"
    try:
        version = json.loads(path.read_bytes()).get("spec_version")
    except (OSError, ValueError, AttributeError):
        version = None
    line = f"{where}: {first['msg']}"
    if first["type"] == "extra_forbidden" or (version is not None and version != SPEC_VERSION):
        line += (
            f" (spec_version {version}, this agent reads {SPEC_VERSION}: written by another harness "
            f"version than this agent's mle_world {__version__}; rebuild the image or reinstall)"
        )
    return line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mle_world.agent", description=__doc__)
    parser.add_argument("--spec", required=True, type=Path, help="path to the trial's spec.json")
    args = parser.parse_args(argv)
    spec = load_record(args.spec, TrialSpec)
    if isinstance(spec, Unreadable):
        error = spec.error
        problem = spec_problem(args.spec, error) if isinstance(error, ValidationError) else error
        print(f"error: cannot read spec {args.spec}: {problem}", file=sys.stderr)
        return 2
    if spec.agent.world_model.enabled and "world" not in spec.agent.endpoints:
        print(f"error: {args.spec}: world_model.enabled needs a 'world' endpoint", file=sys.stderr)
        return 2
    if "coder" not in spec.agent.endpoints:
        print(f"error: {args.spec}: no 'coder' endpoint", file=sys.stderr)
        return 2
    layout = TrialLayout(Path(spec.paths.trial_dir), Path(spec.paths.data_dir))
    if hold_journal(layout) is None:
        print(
            f"error: {layout.journal} is held by another live agent; not resuming it (exit {JOURNAL_BUSY})",
            file=sys.stderr,
        )
        return JOURNAL_BUSY
    _configure_logging(TrialFiles(layout.trial_dir).agent_log, key_redactor(spec))
    gpu: GpuInfo | None = None
    if gpus_given(os.environ):
        try:
            gpu = check_gpu()
        except GpuUnusableError as error:
            reason = f"infra: GPU unusable: {error}"
            print(f"error: {reason}", file=sys.stderr)
            write_model(
                layout.result, AgentResult(trial_id=spec.trial_id, status="failed", stop_reason=reason)
            )
            return 1
        log.info(
            "GPU check: %s, driver %s, %s", ", ".join(gpu.names), gpu.driver, gpu.framework or "no framework"
        )
    enable_subreaper()
    _install_signal_handlers()
    try:
        agent = build_agent(spec)
        result = agent.run()
        if gpu is not None:
            write_model(layout.result, result.model_copy(update={"gpu": gpu}))
    except (CheckpointMismatch, CorruptJournal) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SandboxUnavailable as error:
        log.error("sandbox unavailable: %s", error)
        write_model(
            layout.result,
            AgentResult(trial_id=spec.trial_id, status="failed", stop_reason=f"sandbox_unavailable: {error}"),
        )
        return 1
    except Preempted as stop:
        log.warning("preempted by %s: checkpointed, exiting %d", stop, stop.exit_code)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        # Threads may still wait on HTTP responses; the checkpoint is on disk, so leave now.
        os._exit(stop.exit_code)
    log.info("trial %s: %s (%s)", spec.trial_id, result.status, result.stop_reason)
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
