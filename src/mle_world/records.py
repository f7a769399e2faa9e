"""Pydantic records for everything the harness writes to disk or passes into a container.

`TrialSpec` (spec.json) is read by the agent; `TrialStatus` (status.json), `AgentResult`
(result.json) and `LaunchRecord` (launch.json) are written by launch/agent and read by status/audit.
Longer than 400 lines because it is the one schema of every file that crosses a process boundary
(spec, status, result, launch, events); split, the contract would be read in several places.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Role = Literal["coder", "feedback", "world"]
ROLES: tuple[Role, ...] = ("coder", "feedback", "world")
Regime = Literal["gated", "ungated"]
Stage = Literal["draft", "debug", "improve"]
StructuredOutput = Literal["none", "json_schema", "json_object"]
"""How an endpoint is asked for JSON-schema constrained decoding (`EndpointSettings.structured_output`)."""
GateLabel = Literal["execute", "skip", "forced", "not_gated", "not_selected"]
"""execute/forced/skip: the gated decision on a step's best-ranked candidate (skip = the step is
vetoed); not_gated: the candidate an ungated step ran; not_selected: another candidate of the step."""

SPEC_VERSION = 1


class Record(BaseModel):
    """Base of every on-disk record: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def improves(metric: float | None, reference: float | None, lower_is_better: bool | None) -> bool:
    """The one "improves" rule: `metric` strictly beats `reference` in the metric's direction.

    No metric improves on nothing; any metric improves on no reference (the first good node, as
    `p_improves` is asked). An unknown direction counts as higher-is-better (AIDE's default).
    """
    if metric is None:
        return False
    if reference is None:
        return True
    return metric < reference if lower_is_better else metric > reference


def check_endpoint_url(text: str) -> str:
    """An http(s) base URL with a host and a valid port; ValueError says what is wrong with it."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r} is not an http(s) URL (expected e.g. http://host:8000/v1)")
    if not parts.hostname:
        raise ValueError(f"{text!r} has no host (expected e.g. http://host:8000/v1)")
    if port == 0:
        raise ValueError(f"{text!r} has port 0")
    return text


class EndpointSettings(Record):
    """One OpenAI-compatible endpoint role."""

    url: str | tuple[str, ...]
    """Base URL including /v1, e.g. http://localhost:8000/v1, or the URLs of several replicas."""
    model: str | None = None
    """Served model id; discovered from /v1/models when null."""

    key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    temperature: float = Field(0.5, ge=0.0, le=2.0)
    max_tokens: int = Field(4096, gt=0)
    timeout_s: float = Field(600.0, gt=0)
    """Per-request timeout (further capped by the trial's time left plus the outage window)."""
    outage_window_s: float = Field(900.0, gt=0)
    """How long a request keeps retrying an outage or protocol garbage before the trial fails as infra."""
    max_concurrent: int = Field(4, ge=1)
    """Requests one trial may have in flight to this role at once (concurrent candidates count)."""
    context_length: int | None = Field(None, gt=0)
    """Tokens the model accepts (prompt + completion); null: the `max_model_len` /v1/models reports."""
    structured_output: StructuredOutput = "none"
    """Constrained decoding of the world model's and the reviewer's JSON replies (world and feedback
    roles only): `json_schema` sends OpenAI's `response_format` `{"type": "json_schema", ...}` (vLLM,
    llama.cpp's llama-server, OpenAI); `json_object` sends `{"type": "json_object", "schema": ...}`
    (llama-cpp-python's server, which refuses the other); `none` sends no `response_format`. A server
    that refuses it gets the request again without it, and none for the rest of the trial."""

    @field_validator("url", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        if isinstance(value, str) and "," in value:
            value = [u for u in value.split(",")]
        if isinstance(value, list | tuple):
            urls = tuple(str(u).strip() for u in value)
            if not urls or not all(urls):
                raise ValueError("url: give one URL or a non-empty list of URLs")
            if len(set(urls)) != len(urls):
                raise ValueError("url: a replica URL is listed twice")
            return urls[0] if len(urls) == 1 else urls
        return value

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        if isinstance(value, str):
            return check_endpoint_url(value)
        return tuple(check_endpoint_url(url) for url in value)

    @property
    def urls(self) -> tuple[str, ...]:
        """Every replica's base URL (one for a single server)."""
        return (self.url,) if isinstance(self.url, str) else self.url


class EndpointsFile(Record):
    """An endpoints file: the replicas' URLs per role, written by the serve scripts as they come up."""

    coder: tuple[str, ...] = ()
    feedback: tuple[str, ...] = ()
    world: tuple[str, ...] = ()

    @field_validator("coder", "feedback", "world")
    @classmethod
    def _valid_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_endpoint_url(url) for url in value)

    def urls(self, role: Role) -> tuple[str, ...]:
        urls: tuple[str, ...] = getattr(self, role)
        return urls


class BudgetSettings(Record):
    """Time and step budget of one trial."""

    time_limit_s: float = Field(43200.0, gt=0)
    """Wall-clock limit over LLM calls and executions (12 h in the paper)."""
    max_steps: int = Field(500, gt=0)
    exec_timeout_s: float = Field(32400.0, gt=0)
    """Limit of one full execution; each run gets min(this, time left)."""
    debug_timeout_s: float = Field(600.0, gt=0)
    """Limit of the `--debug` pre-run."""
    min_step_s: float = Field(120.0, ge=0)
    """No new step starts with less than this much time left."""


class SearchSettings(Record):
    """AIDE's search policy parameters."""

    num_drafts: int = Field(5, ge=1)
    debug_prob: float = Field(1.0, ge=0.0, le=1.0)
    max_debug_depth: int = Field(20, ge=0)


class StageGuidance(Record):
    """A Kapso-style budget stage: active while progress < `until`."""

    name: str
    until: float = Field(gt=0.0, le=1.0)
    guidance: str
    ensemble_top_k: int = Field(0, ge=0)
    """When > 0, prompts in this stage show the best k nodes from history for ensembling."""


class WorldModelSettings(Record):
    """World-model knobs of one configuration (DESIGN §4)."""

    enabled: bool = False
    candidates: int = Field(1, ge=1)
    """Candidates generated (concurrently) per step for the stages it applies to."""
    selection: Literal["pointwise", "pairwise"] = "pointwise"
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    """Pointwise: a candidate passes when p_improves >= threshold."""
    bug_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """Pointwise: a candidate fails when p_bug >= bug_threshold."""
    pairwise_confidence: float = Field(0.7, ge=0.0, le=1.0)
    """Pairwise: a comparison counts only at or above this confidence."""
    min_confidence: float = Field(0.6, ge=0.0, le=1.0)
    """Predictions below this confidence never gate."""
    max_consecutive_skips: int = Field(3, ge=0)
    applies_to: tuple[Stage, ...] = ("improve",)
    context: Literal["full", "blind"] = "full"
    """full: task, data preview, parent code/metric/output, candidate; blind: task + candidate only."""
    temperature: float = Field(1.0, ge=0.0, le=2.0)


class AgentSettings(Record):
    """Everything the in-container agent needs besides paths: the resolved science config."""

    endpoints: dict[Role, EndpointSettings]
    budget: BudgetSettings
    search: SearchSettings
    stages: tuple[StageGuidance, ...]
    world_model: WorldModelSettings
    data_preview: bool = True
    obfuscate: bool = False
    """Replace 'Kaggle grandmaster' with 'expert machine learning engineer' in prompts."""


class SandboxSettings(Record):
    """How each execution of generated code is confined and bounded (docs/threat-model.md).

    Not part of the science hash: like the GPU type, it is the environment a trial ran in.
    """

    enabled: bool = True
    """False only with `--no-sandbox` (process runtime): scripts then run as the agent, unconfined."""
    memory_mb: int | None = Field(49152, ge=16)
    """RLIMIT_DATA of every process of a script (heap and private mappings; CUDA's reserved address
    space is not counted); None for no limit. Slurm's `--mem` bounds the whole trial on that backend."""
    max_processes: int | None = Field(512, ge=8)
    """RLIMIT_NPROC (processes and threads) of a script, counted in its own user namespace."""
    disk_mb: int | None = Field(102400, ge=16)
    """Space the workspace may take while a script runs (allocated blocks, with its `tmp/`): RLIMIT_FSIZE
    bounds each file to it, and the agent kills a run whose workspace grows past it (DiskLimitError)
    and removes what the script wrote; None for no limit."""
    max_files: int | None = Field(1_000_000, ge=64)
    """Files and directories the workspace may hold while a script runs (empty files take no space but
    inodes); over it, the run is stopped as for `disk_mb` (watched only when `disk_mb` is set)."""
    disk_reserve_mb: int | None = Field(1024, ge=0)
    """Space the file system holding the workspace keeps free: the trials beside it (and this one's
    records) write there too. A run whose workspace grows by more than half of it while less is free is
    stopped as for `disk_mb`; with less free before a run, the trial fails as infra. None: not watched."""
    files_reserve: int | None = Field(10_000, ge=0)
    """Inodes that file system keeps free likewise (watched with `disk_reserve_mb`)."""
    output_kb: int = Field(1024, ge=4)
    """Output kept per execution in its log: the first and last halves; the middle is dropped and counted."""
    network: bool = False
    """Whether scripts share the agent's network; off: only a loopback of their own."""
    code_uid: int = Field(65534, ge=1)
    """Host uid the script runs as when the agent is root (nobody); an ordinary user's scripts keep
    that user's uid outside their user namespace."""


class TrialPaths(Record):
    """Paths as the agent sees them (inside the container or sandbox)."""

    trial_dir: str
    data_dir: str
    """The task's public data (read-only)."""


class TrialSpec(Record):
    """spec.json: one trial's identity and resolved settings."""

    spec_version: int = Field(SPEC_VERSION, le=SPEC_VERSION)
    """A newer spec (a launcher of a newer harness than the agent's image) is refused, not misread."""
    trial_id: str
    """Readable id: <regime>/<configuration>/<task>/seed<seed>."""
    science_hash: str
    """sha256 prefix over the fields that affect results (cluster and path settings excluded)."""
    regime: Regime
    configuration: str
    task: str
    seed: int
    agent: AgentSettings
    paths: TrialPaths
    lower_is_better: bool | None = None
    """The competition's metric direction when the registry knows it (MLE-bench's leaderboard order,
    a local competition's leaderboard); null: the majority of the reviewer's answers decides."""
    sandbox: SandboxSettings = SandboxSettings()


class TrialStatus(Record):
    """status.json: the trial's state machine, written atomically by the launcher."""

    trial_id: str
    state: Literal["pending", "submitted", "running", "succeeded", "failed"] = "pending"
    attempt: int = 0
    backend: str | None = None
    slurm_job_id: str | None = None
    slurm_array_id: str | None = None
    host: str | None = None
    gpu: str | None = None
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    failure_class: Literal["infra", "agent"] | None = None
    cause: str | None = None
    updated_at: datetime | None = None
    requeues: int = 0
    """Times the trial was checkpointed and requeued (preemption/timeout) within its attempts."""
    wall_used_s: float = Field(0.0, ge=0, allow_inf_nan=False)
    """Wall time of this attempt's runs that have ended: while running, the earlier (interrupted)
    runs, carried over into the wall limit; once final, what the whole attempt took."""
    downtime_s: float = Field(0.0, ge=0, allow_inf_nan=False)
    """Endpoint downtime the agent excluded from its budget (from result.json; extends the wall limit)."""
    exit_code: int | None = None
    """Exit code of the trial command's last run (None while running or when never started)."""
    pid: int | None = None
    """Process group of the running command (local backend; diagnostic only)."""
    token: str | None = None
    """Fencing token (Slurm submission id or local launch id): only a job carrying it may run the trial."""
    slurm_restarts: int = 0  # SLURM_RESTART_COUNT at the current job's last start (requeues count from it)
    preemptions: int = 0
    """Times Slurm's SIGTERM/USR2 stopped the agent, which checkpointed."""
    launches: tuple[str, ...] = ()
    """Ids of the launches (launch.json `launch_id`) that submitted this trial, oldest first: the last ran
    its latest attempt; several mean it resumed under later launches. Empty in files from before."""


class GpuInfo(Record):
    """What the GPU check at the start of a trial found (inside the container)."""

    names: tuple[str, ...]
    """Model names from nvidia-smi, one per visible GPU."""
    driver: str
    """NVIDIA driver version."""
    framework: str | None = None
    """e.g. "torch 2.13.0 (CUDA 13.0)"; None when the image has no framework."""
    framework_devices: int | None = None
    """GPUs the framework sees."""


class AgentResult(Record):
    """result.json: written by the agent when it stops."""

    trial_id: str
    status: Literal["completed", "failed"]
    stop_reason: str
    """e.g. time_limit, max_steps (the limit that stopped the trial), endpoint_unavailable: ...,
    internal: ... (see launch.verdict.INFRA_STOP_REASONS)"""
    best_metric: float | None = None
    lower_is_better: bool | None = None
    best_node_id: str | None = None
    steps: int = 0
    """Loop steps (one per parent chosen); the step limit counts `executed`."""
    nodes: int = 0
    """Nodes in the journal: executed plus not executed candidates."""
    executed: int = 0
    skipped: int = 0
    """Candidates not executed (vetoed or not selected)."""
    buggy: int = 0
    consulted_steps: int = 0
    """Steps on which the world model was asked."""
    vetoed_steps: int = 0
    """Gated steps whose best-ranked candidate was rejected, so nothing ran (executions saved)."""
    not_selected: int = 0
    """Candidates of multi-candidate steps that lost the ranking (not a veto)."""
    direction_source: Literal["task", "reviews"] | None = None
    direction_disagreements: int = 0
    """Good nodes whose review states the other metric direction than the one used."""
    metric_mismatches: int = 0
    """Nodes whose printed `Validation metric:` differs from the reviewer's (the printed one is used)."""
    context_overflows: int = 0
    """Nodes lost because a prompt exceeded the context window even when shrunk."""
    time_used_s: float = 0.0
    exec_time_s: float = 0.0
    llm_time_s: float = 0.0
    downtime_s: float = 0.0
    """Time during which every replica of some role was down; excluded from time_used_s."""
    resumed: int = 0
    """How many times the trial resumed from a checkpoint."""
    has_submission: bool = False
    gpu: GpuInfo | None = None
    """The GPU check of the last session; None when the trial was given no GPU."""
    submission_sha256: str | None = None
    """sha256 of submission/submission.csv as the agent copied it from the best node's run."""


class EndpointRecord(Record):
    """An endpoint as recorded in launch.json: URL and served model, never a key."""

    role: Role
    url: str
    key_env: str | None = None
    served_models: tuple[str, ...] = ()
    probed: bool = False


class LaunchedTrial(Record):
    """One trial as listed in launch.json."""

    trial_id: str
    science_hash: str
    trial_dir: str
    command: str


class LaunchProvenance(Record):
    """What produced a launch's numbers besides its science config: code, served models, image.

    launch.json keeps one per earlier real launch of the sweep (`earlier_launches`): a resume whose
    provenance differs is refused unless `--allow-provenance-change`, and the audit flags the mix."""

    created_at: datetime
    harness_version: str
    git_sha: str | None
    git_dirty: bool | None = None
    git_diff_sha256: str | None = None
    package_sha256: str | None = None
    launch_id: str | None = None
    """The launch's id (status.json `launches`); None in launch.json files from before launches had ids."""
    served_models: tuple[str, ...] = ()
    """`role=model id` as the probed servers listed them (empty for a role not probed)."""
    image_sha256: str | None = None
    data_manifests: tuple[str, ...] = ()
    """`task=fingerprint` of the prepared data (launch/data_manifest.py)."""
    mlebench_version: str | None = None
    """The MLE-bench the launch's grading check used (with --grade and an MLE-bench task), else None."""


class LaunchRecord(Record):
    """launch.json: provenance of the latest launch of a sweep (rewritten on every launch); its trials
    are every trial launched into the output dir, by this launch or an earlier one of the same science."""

    argv: tuple[str, ...]
    launch_id: str | None = None
    """This launch's id, which the trials it submits record (status.json `launches`); None in files
    written before launches had ids."""
    harness_version: str
    git_sha: str | None
    git_dirty: bool | None = None
    """The checkout's src/ had uncommitted changes (tracked or untracked); None when not run from git."""
    git_diff_sha256: str | None = None
    """sha256 of `git status --porcelain` + `git diff HEAD` when dirty: two dirty launches of one
    commit with different edits differ here."""
    package_sha256: str | None = None
    """sha256 of the package's own files when it does not run from a git checkout (an installed copy,
    whose code changes no commit shows); None in a checkout."""
    created_at: datetime
    regime: Regime
    config_path: str
    config_hash: str
    """sha256 of the resolved science config of this regime (agent-config.yaml)."""
    cluster_path: str | None
    backend: str
    runtime: str
    dry_run: bool
    sandbox: bool
    warnings: tuple[str, ...] = ()
    data_dir: str
    competitions_dirs: tuple[str, ...] = ()
    """The --competitions-dir folders (absolute): `grade` finds the sweep's own local competitions."""
    image_path: str | None = None
    image_sha256: str | None = None
    data_manifests: dict[str, str] = {}
    """task → fingerprint of its prepared public and private data (file names and sizes, the answers'
    content; launch/data_manifest.py) as this launch found it."""
    endpoints_file: str | None = None
    """The endpoints file the replicas' URLs came from (scripts/serve/serve_replicas.sh), if any."""
    mlebench_version: str | None = None
    """With --grade: the MLE-bench that grades (`<version> (git <commit>…)`, as each grading report
    records it), from the launch's grading check; None without --grade or for local competitions only."""
    endpoints: tuple[EndpointRecord, ...]
    trials: tuple[LaunchedTrial, ...]
    earlier_launches: tuple[LaunchProvenance, ...] = ()
    """The provenance of every earlier real launch into this output dir, oldest first."""

    def provenance(self) -> LaunchProvenance:
        served = sorted({f"{e.role}={m}" for e in self.endpoints if e.probed for m in e.served_models})
        return LaunchProvenance(
            created_at=self.created_at,
            harness_version=self.harness_version,
            git_sha=self.git_sha,
            git_dirty=self.git_dirty,
            git_diff_sha256=self.git_diff_sha256,
            package_sha256=self.package_sha256,
            launch_id=self.launch_id,
            served_models=tuple(served),
            image_sha256=self.image_sha256,
            data_manifests=tuple(f"{task}={digest}" for task, digest in sorted(self.data_manifests.items())),
            mlebench_version=self.mlebench_version,
        )


class LLMCallEvent(Record):
    """events.jsonl line for one endpoint call (every attempt that reached an outcome)."""

    type: Literal["llm_call"] = "llm_call"
    ts: datetime
    role: Role
    model: str | None
    purpose: str
    """e.g. draft, improve, debug, review, predict, compare."""
    prompt_tokens: int | None
    """None when the server returned no usage (unknown is not zero)."""
    completion_tokens: int | None
    latency_s: float
    outcome: Literal["ok", "retry", "error"]
    error: str | None = None
    finish_reason: str | None = None
    """Why the server stopped generating (`length`: cut at max_tokens); None when not answered or not said."""
    served_model: str | None = None
    """The model id the completion reported when it is not `model` (a gateway or router answering an
    alias with another model); None when it is the same, or not answered."""


class DowntimeEvent(Record):
    """events.jsonl line when every replica of a role went down, and when the role came back."""

    type: Literal["downtime"] = "downtime"
    ts: datetime
    role: Role
    phase: Literal["down", "up", "ended"]
    """down: the outage began (budget clock paused); up: a replica answered; ended: the session
    stopped during the outage (gave up or was preempted)."""
    downtime_s: float | None = None
    """Length of this role's outage (on up/ended)."""
    cause: str | None = None


class ExecutionEvent(Record):
    """events.jsonl line for one script execution (debug pre-run or full run)."""

    type: Literal["execution"] = "execution"
    ts: datetime
    node_id: str
    kind: Literal["debug", "full"]
    exec_time_s: float
    timeout_s: float
    timed_out: bool
    exit_code: int | None
    gpu: str | None = None
    """CUDA_VISIBLE_DEVICES seen by the script; GPU-hours are accounted when set."""
    output_bytes: int | None = None
    """Bytes the script wrote to stdout and stderr (its log keeps a bounded head and tail)."""
    workspace_bytes: int | None = None
    """Disk used by workspace/ after the run (allocated blocks, links not followed)."""


class PairwiseMatch(Record):
    """One pairwise comparison a candidate took part in, kept on its prediction (nodes as shown)."""

    a: str
    """Id of the node shown in position A."""
    b: str
    """Id of the node shown in position B."""
    better: Literal["A", "B"] | None = None
    """The position the world model preferred; None when its reply was invalid."""
    confidence: float | None = None
    valid: bool
    counted: bool
    """Valid with confidence >= pairwise_confidence: only a counted match decides anything."""
    versus_best: bool = False
    """A comparison with the best node so far (the gate's question), not a tournament match."""


class Prediction(Record):
    """What the world model said about one candidate: the parsed reply, then its place in the step.

    One shape everywhere: the world model's parser returns it (pointwise; agent/consult.py builds the
    pairwise one from the matches) and consult adds `rank`, `rejected` and `counterfactual_gate` (as
    copies: it is frozen); journal.json keeps it on the node and each `PredictionEvent` carries it.
    """

    mode: Literal["pointwise", "pairwise"]
    valid: bool
    """False when the output was missing or malformed (fail-open: the node executes)."""
    p_bug: float | None = None
    p_improves: float | None = None
    """Pointwise: the model's answer; pairwise: its confidence that the candidate beats the best
    so far, read off the comparison with the best (`pairwise_p_improves` in agent/gate.py)."""
    predicted_metric: float | None = None
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None
    """What was wrong with the reply (a dropped field, no JSON, context overflow)."""
    rank: int | None = None
    """0 for the candidate the world model ranked first among the step's candidates."""
    rejected: bool | None = None
    """This verdict alone would veto the candidate (pairwise: known for those compared with the best)."""
    counterfactual_gate: GateLabel | None = None
    """Ungated runs: the gated regime's decision on this candidate (gate precision/recall)."""
    comparisons: tuple[PairwiseMatch, ...] = ()
    """Pairwise: the tournament matches of the candidate and its comparison with the best."""


_FLAT_PREDICTION_FIELDS = (
    "mode",
    "valid",
    "p_bug",
    "p_improves",
    "predicted_metric",
    "confidence",
    "rejected",
    "counterfactual_gate",
)
"""The prediction's fields a `PredictionEvent` line held at its top level before it nested them."""


class PredictionEvent(Record):
    """events.jsonl line for a world-model prediction and, for executed nodes, its outcome."""

    type: Literal["prediction"] = "prediction"
    ts: datetime
    node_id: str
    stage: Stage
    step: int | None = None
    """Loop step (the journal's group) of the candidate."""
    candidate: int | None = None
    prediction: Prediction
    gate: GateLabel
    """Decision: execute, skip (gated veto of the step), forced (after max consecutive skips),
    not_gated (run by the ungated regime), not_selected (another candidate of the step ran or was vetoed)."""
    executed: bool
    """The candidate's script ran and has an outcome (False for one the gate did not run, and for a
    chosen one the trial's budget left no time to run)."""
    actual_buggy: bool | None = None
    actual_improved: bool | None = None
    """Known for executed nodes: the node is good and `improves` on the best node before it."""
    actual_metric: float | None = None
    budget_time_s: float | None = None
    """Trial budget time used when the step ended."""

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_prediction(cls, data: Any) -> Any:
        """Lines written before the prediction was nested held its fields at the top level."""
        if not isinstance(data, dict) or "prediction" in data or "mode" not in data:
            return data
        flat = dict(data)
        nested = {key: flat.pop(key) for key in _FLAT_PREDICTION_FIELDS if key in flat}
        return {**flat, "prediction": nested}
