"""The coder's part of a step: its prompt, with Memory and ensemble fitted to the context window, and
the step's candidates generated concurrently.

Reads the journal and the budget; writes nothing (returns new, unexecuted nodes; the endpoint client
records the calls).
"""

from __future__ import annotations

import logging
import time
import uuid

from mle_world.agent.budget import Budget
from mle_world.agent.journal import Journal, Node
from mle_world.agent.llm.client import ChatModel, ContextOverflow
from mle_world.agent.llm.fanout import fan_out
from mle_world.agent.llm.window import SHRINK, prompt_chars, size
from mle_world.agent.prompts import (
    PromptContext,
    debug_messages,
    draft_messages,
    extract_plan_and_code,
    has_code_block,
    improve_messages,
)
from mle_world.agent.seeds import request_seed
from mle_world.records import AgentSettings, Stage

log = logging.getLogger(__name__)
CODE_TRIES = 3
"""Replies asked for until one has a code block; after that the raw reply is the code (AIDE's fallback).
A reply cut at max_tokens without a closed code block counts as one without code (its script is cut too)."""


class Coder:
    """Asks the `coder` endpoint for a step's draft, debug or improve candidates (AIDE's prompts)."""

    def __init__(
        self,
        model: ChatModel,
        settings: AgentSettings,
        journal: Journal,
        budget: Budget,
        *,
        task: str,
        preview: str | None,
        seed: int,
    ) -> None:
        self.model = model
        self.settings = settings
        self.journal = journal
        self.budget = budget
        self.task = task
        self.preview = preview
        self.seed = seed

    def prompt_context(
        self,
        candidate: int,
        candidates: int,
        group: int,
        memory_chars: int | None = None,
        ensemble_chars: int | None = None,
        *,
        empty: bool = False,
    ) -> PromptContext:
        view = self.budget.view(len(self.journal.executed_nodes), self.settings.stages)
        ensemble: tuple[Node, ...] = ()
        if not empty and view.stage is not None and view.stage.ensemble_top_k > 0:
            ensemble = tuple(self.journal.top_nodes(view.stage.ensemble_top_k))
        return PromptContext(
            task=self.task,
            memory="" if empty else self.journal.memory(memory_chars),
            budget=view,
            exec_timeout_s=self.budget.exec_timeout(debug=False),
            debug_timeout_s=self.budget.exec_timeout(debug=True),
            data_preview=self.preview,
            obfuscate=self.settings.obfuscate,
            ensemble=ensemble,
            candidate=candidate,
            candidates=candidates,
            rng_seed=self.seed * 100_003 + group,
            ensemble_chars=ensemble_chars,
        )

    def messages(self, stage: Stage, parent: Node | None, ctx: PromptContext) -> list[dict[str, str]]:
        if stage == "draft":
            return draft_messages(ctx)
        if parent is None:
            raise ValueError(f"stage {stage} needs a parent")
        return debug_messages(ctx, parent) if stage == "debug" else improve_messages(ctx, parent)

    def fitted_context(
        self,
        stage: Stage,
        parent: Node | None,
        index: int,
        k: int,
        group: int,
        limit: int | None,
        share: float,
    ) -> PromptContext:
        """The prompt context whose Memory and ensemble code fit `limit` characters (times `share`).

        The fixed sections (task, parent code, guidelines) are measured first; Memory and the
        ensemble split what is left. Without a known limit the full sections are used (AIDE).
        """
        if limit is None:
            return self.prompt_context(index, k, group)
        fixed = size(self.messages(stage, parent, self.prompt_context(index, k, group, empty=True)))
        room = max(0, int((limit - fixed) * share))
        view_stage = self.budget.view(len(self.journal.executed_nodes), self.settings.stages).stage
        top_k = len(self.journal.top_nodes(view_stage.ensemble_top_k)) if view_stage else 0
        if top_k:
            return self.prompt_context(index, k, group, room // 2, max(0, room // 2 // top_k - 200))
        return self.prompt_context(index, k, group, room)

    def generate(self, stage: Stage, parent: Node | None, k: int, group: int) -> list[Node]:
        limit = prompt_chars(self.model)

        def one(index: int) -> Node:
            node = Node(
                id=uuid.uuid4().hex,
                step=-1,
                stage=stage,
                parent_id=parent.id if parent else None,
                group=group,
                candidate=index,
                ctime=time.time(),
                debug_depth=parent.debug_depth + 1 if stage == "debug" and parent else 0,
            )
            plan, code, raw = "", "", ""
            attempt = 0
            known = limit
            for share in SHRINK:
                messages = self.messages(
                    stage, parent, self.fitted_context(stage, parent, index, k, group, known, share)
                )
                try:
                    for _ in range(CODE_TRIES):
                        seed = request_seed(self.seed, group, index, attempt, stage)
                        attempt += 1
                        reply = self.model.chat(
                            messages, purpose=stage, timeout_s=self.budget.left(), seed=seed
                        )
                        raw = reply.content
                        plan, code = extract_plan_and_code(raw)
                        if reply.finish_reason == "length" and not has_code_block(raw):
                            log.warning(
                                "%s reply cut at max_tokens (%d) before its code block closed",
                                stage,
                                self.model.max_tokens,
                            )
                            continue
                        if code:
                            break
                    break
                except ContextOverflow as error:
                    log.warning("coder prompt of %d chars over the context window: %s", size(messages), error)
                    known = known if known is not None else size(messages)
            else:
                node.context_overflow = True
                node.is_buggy = True
                node.exec_time = 0.0
                node.term_out = "ContextOverflow: the prompt did not fit the model's context window."
                node.analysis = "Not generated: the prompt exceeded the context length even when shrunk."
                return node
            if not code:
                # AIDE's fallback: the raw completion fails at run time and becomes a debug target.
                code = raw
            node.plan, node.code = plan, code
            return node

        return fan_out(one, list(range(k)))
