"""The in-container agent: an AIDE-faithful loop with a world-model gate, time budget and resume.

Reads a `TrialSpec` (spec.json); writes the trial dir's journal, events, best submission and result.
This module is the agent's public face to host code (audit, grading, launch): the names below, each
imported when first used, so readers of its records (the audit reads journals) don't pay for the
loop's HTTP client. Everything else in the package is internal (an import-linter contract).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mle_world.agent.budget import Budget as Budget
    from mle_world.agent.consult import Consultant as Consultant
    from mle_world.agent.consult import TaskFacts as TaskFacts
    from mle_world.agent.events import MemorySink as MemorySink
    from mle_world.agent.gate import GateOutcome as GateOutcome
    from mle_world.agent.gate import choose as choose
    from mle_world.agent.gate import rank_pointwise as rank_pointwise
    from mle_world.agent.gate import rejects as rejects
    from mle_world.agent.journal import JOURNAL_VERSION as JOURNAL_VERSION
    from mle_world.agent.journal import Checkpoint as Checkpoint
    from mle_world.agent.journal import CorruptJournal as CorruptJournal
    from mle_world.agent.journal import Journal as Journal
    from mle_world.agent.journal import Node as Node
    from mle_world.agent.journal import load_checkpoint as load_checkpoint
    from mle_world.agent.journal import load_journal_data as load_journal_data
    from mle_world.agent.journal import log_path as log_path
    from mle_world.agent.llm.client import EndpointClient as EndpointClient
    from mle_world.agent.llm.client import EndpointFailure as EndpointFailure
    from mle_world.agent.llm.redaction import Redactor as Redactor
    from mle_world.agent.llm.response_models import build_response_models as build_response_models
    from mle_world.agent.llm.transport import http_client as http_client
    from mle_world.agent.llm.window import RESERVE_TOKENS as RESERVE_TOKENS
    from mle_world.agent.preview import data_preview as data_preview
    from mle_world.agent.preview import task_description as task_description
    from mle_world.agent.prompts import pairwise_messages as pairwise_messages
    from mle_world.agent.prompts import pointwise_messages as pointwise_messages
    from mle_world.agent.sandbox.workspace import file_sha256 as file_sha256
    from mle_world.agent.seeds import request_seed as request_seed
    from mle_world.agent.seeds import step_rng as step_rng
    from mle_world.agent.world import Comparison as Comparison
    from mle_world.agent.world import WorldModel as WorldModel

_EXPORTS = {
    # the journal as the audit and grading read it
    "Node": "mle_world.agent.journal",
    "load_journal_data": "mle_world.agent.journal",
    "log_path": "mle_world.agent.journal",
    # the submission's fingerprint grading records
    "file_sha256": "mle_world.agent.sandbox.workspace",
    # the endpoint client's pieces check-endpoints probes with, so a probe talks as a trial does
    "Redactor": "mle_world.agent.llm.redaction",
    "build_response_models": "mle_world.agent.llm.response_models",
    "http_client": "mle_world.agent.llm.transport",
    "RESERVE_TOKENS": "mle_world.agent.llm.window",
    # the gate's pure rules, which the audit's what-if replays on recorded predictions
    "GateOutcome": "mle_world.agent.gate",
    "choose": "mle_world.agent.gate",
    "rank_pointwise": "mle_world.agent.gate",
    "rejects": "mle_world.agent.gate",
    # replay: a recorded candidate's world-model request rebuilt by the agent's own code (its journal as
    # the loop checkpoints it, the consultant's context, the prompts, seeds and reply parsing, the client)
    "JOURNAL_VERSION": "mle_world.agent.journal",
    "Checkpoint": "mle_world.agent.journal",
    "CorruptJournal": "mle_world.agent.journal",
    "Journal": "mle_world.agent.journal",
    "load_checkpoint": "mle_world.agent.journal",
    "Budget": "mle_world.agent.budget",
    "Consultant": "mle_world.agent.consult",
    "TaskFacts": "mle_world.agent.consult",
    "data_preview": "mle_world.agent.preview",
    "task_description": "mle_world.agent.preview",
    "pointwise_messages": "mle_world.agent.prompts",
    "pairwise_messages": "mle_world.agent.prompts",
    "request_seed": "mle_world.agent.seeds",
    "step_rng": "mle_world.agent.seeds",
    "Comparison": "mle_world.agent.world",
    "WorldModel": "mle_world.agent.world",
    "EndpointClient": "mle_world.agent.llm.client",
    "EndpointFailure": "mle_world.agent.llm.client",
    "MemorySink": "mle_world.agent.events",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
