"""Local backend: a pool of `--n-workers` trials on the current node with exclusive GPU slots.

Reads and writes each trial's status.json through `TrialSupervisor`; reports progress through a `Display`.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from mle_world.errors import UserError
from mle_world.launch.display import Display
from mle_world.launch.trial import Outcome, PostTrial, TrialJob, TrialSupervisor

_RANGE = re.compile(r"^(\d+)-(\d+)$")


def parse_gpu_devices(text: str) -> tuple[str, ...]:
    """`--gpu-device`: "0,1,2,3", "0-3" or a mix ("0-1,4"); duplicates and junk are refused."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        match = _RANGE.match(part)
        if match:
            low, high = int(match[1]), int(match[2])
            if low > high:
                raise UserError(f"--gpu-device: empty range '{part}'")
            out.extend(str(i) for i in range(low, high + 1))
        elif part.isdigit():
            out.append(str(int(part)))
        else:
            raise UserError(f"--gpu-device: '{part}' is not a GPU index or range (e.g. 0,1,2 or 0-3)")
    dupes = sorted({d for d in out if out.count(d) > 1}, key=int)
    if dupes:
        raise UserError(f"--gpu-device: GPU {', '.join(dupes)} listed twice")
    return tuple(out)


@dataclass(frozen=True)
class PoolResult:
    outcomes: dict[str, Outcome]
    interrupted: bool
    error: str | None = None
    """Why the pool stopped early: a trial's run raised (e.g. status.json could not be written: disk
    full); the other running trials were stopped as by Ctrl-C and left resumable."""


class GpuSlots:
    """`trials_per_gpu` slots per device; a trial holds one slot while it runs."""

    def __init__(self, devices: Sequence[str], trials_per_gpu: int) -> None:
        self._free: queue.Queue[str] = queue.Queue()
        for _ in range(trials_per_gpu):
            for device in devices:
                self._free.put(device)
        self.size = len(devices) * trials_per_gpu

    def acquire(self) -> str:
        return self._free.get()

    def release(self, device: str) -> None:
        self._free.put(device)


def run_pool(
    jobs: Sequence[TrialJob],
    *,
    n_workers: int,
    gpu_devices: Sequence[str],
    trials_per_gpu: int,
    post_trial: PostTrial | None,
    display: Display,
    show_progress: bool,
) -> PoolResult:
    """Run already-`submitted` jobs; Ctrl-C stops every running group and leaves them pending."""
    if trials_per_gpu < 1:
        raise UserError("--trials-per-gpu must be at least 1")
    slots = GpuSlots(gpu_devices, trials_per_gpu) if gpu_devices else None
    workers = max(1, min(n_workers, slots.size if slots else n_workers, len(jobs) or 1))
    supervisors: dict[str, TrialSupervisor] = {}
    lock = threading.Lock()
    stopping = threading.Event()

    def one(job: TrialJob) -> Outcome:
        if stopping.is_set():
            return "interrupted"
        gpu = slots.acquire() if slots else None
        try:
            supervisor = TrialSupervisor(job, gpu=gpu, post_trial=post_trial, resume_state="pending")
            with lock:
                if stopping.is_set():
                    return "interrupted"
                supervisors[job.trial_id] = supervisor
            return supervisor.run()
        finally:
            if gpu is not None and slots is not None:
                slots.release(gpu)

    outcomes: dict[str, Outcome] = {}
    errors: list[str] = []

    def collect(future: Future[Outcome]) -> None:
        job = futures[future]
        try:
            outcomes[job.trial_id] = "interrupted" if future.cancelled() else future.result()
        except Exception as exc:  # the run's end could not be recorded: stop the sweep, keep the rest
            outcomes[job.trial_id] = "interrupted"
            errors.append(f"{job.trial_id}: {type(exc).__name__}: {exc}")

    def stop_all(reason: str) -> None:
        stopping.set()
        with lock:
            for supervisor in supervisors.values():
                supervisor.request_stop(reason)
        for future in futures:
            future.cancel()
        # The supervisors terminate their groups and write 'pending'; wait for them, not for the queue.
        for future in futures:
            if futures[future].trial_id not in outcomes:
                wait([future])  # at once for a cancelled one
                collect(future)

    interrupted = False
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trial")
    futures: dict[Future[Outcome], TrialJob] = {pool.submit(one, job): job for job in jobs}
    order = {future: i for i, future in enumerate(futures)}
    if show_progress:
        display.start_progress(len(jobs))
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=order.__getitem__):  # a set: report in the plan's order
                collect(future)
            if errors:
                display.say(f"[launch] stopping the sweep: {errors[0]}")
                stop_all("the launcher stopped: another trial's run raised")
                break
            if show_progress:
                failed = sum(1 for o in outcomes.values() if o == "failed")
                with lock:
                    running = len(supervisors) - len(outcomes.keys() & supervisors.keys())
                display.update_progress(len(outcomes), running, failed)
    except KeyboardInterrupt as exc:
        interrupted = True
        stop_all(str(exc) or "Ctrl-C")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if show_progress:
            display.stop_progress()
    more = f" (and {len(errors) - 1} more trial(s) alike)" if len(errors) > 1 else ""
    error = errors[0] + more if errors else None
    return PoolResult(outcomes=outcomes, interrupted=interrupted or bool(errors), error=error)
