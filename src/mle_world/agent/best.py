"""The best solution on disk: a better node promoted, and the metric direction when the task has none.

Reads the agent's staged copy of the last run's submission and the journal; writes
submission/submission.csv and best_solution.py (atomically, before the checkpoint names the node)
and, in logs/nodes/, the CSVs a resume or a flip may need: the best's as of the last fsynced
checkpoint, each node's promoted since, and while the direction comes from the reviews each good node's
until another beats it in both directions. The rest are removed (`prune`): each may be as large as the
workspace's disk limit, and a script makes a promotion every step by printing a better metric.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mle_world.agent.journal import Checkpoint, Journal, Node
from mle_world.agent.sandbox.workspace import TrialLayout, file_sha256, link_atomic
from mle_world.layout import KEPT_SUBMISSION_SUFFIX, kept_submission
from mle_world.storage import write_text_atomic

log = logging.getLogger(__name__)


class BestSolution:
    """Keeps submission/submission.csv and best_solution.py on the journal's best node.

    The checkpoint's `best_node_id`, `lower_is_better` and `direction_source` are updated in place.
    """

    def __init__(self, layout: TrialLayout, journal: Journal, ckpt: Checkpoint) -> None:
        self.layout = layout
        self.journal = journal
        self.ckpt = ckpt
        self._kept: set[str] = set()
        """Nodes whose CSV may be kept in logs/nodes/ (all of them on disk after a resume, found by prune)."""
        self._listed = False

    def consider(self, node: Node) -> None:
        """A reviewed node: a good one votes on the direction, then is promoted when it improves on
        the best (else, while the direction may still flip, its submission is kept)."""
        if node.is_buggy:
            return
        self._update_direction(node)
        # The promoted best, not the best before the step: a direction flip above may have changed it.
        best = self.journal.get(self.ckpt.best_node_id)
        if self.journal.improves(node.metric, best.metric if best else None):
            self.promote(node)
        elif self.ckpt.direction_source != "task":
            self._keep_submission(node)

    def _update_direction(self, node: Node) -> None:
        """Unknown task direction: the majority of the reviews of good nodes (ties keep the current)."""
        if self.ckpt.direction_source == "task":
            return
        votes = [n.lower_is_better for n in [*self.journal.good_nodes, node] if n.lower_is_better is not None]
        lower, higher = votes.count(True), votes.count(False)
        current = self.journal.lower_is_better
        direction = current if lower == higher and current is not None else lower > higher
        if current is not None and direction != current:
            log.warning("metric direction flipped by the majority of reviews: lower_is_better=%s", direction)
            self.journal.lower_is_better = direction
            self._repromote(exclude=node)
        self.journal.lower_is_better = direction
        self.ckpt.lower_is_better = direction
        self.ckpt.direction_source = "reviews"

    def _kept_submission(self, node: Node) -> Path:
        return kept_submission(self.layout.trial_dir, node.id)

    def _keep_submission(self, node: Node) -> None:
        """Keep a node's CSV: a promoted one's (for `restore`) and, while the direction is unknown, each
        good node's, in case a flip makes it the best.

        From the agent's staged copy (never the workspace, which the script controls). Not fsynced:
        a flip or `restore` checks the kept copy's hash before it is graded.
        """
        if node.submission_sha256 is not None and self.layout.staged_submission.is_file():
            self._kept.add(node.id)
            link_atomic(self.layout.staged_submission, self._kept_submission(node), durable=False)

    def prune(self) -> None:
        """Remove the kept CSVs no resume or flip can need; call it once a checkpoint is fsynced.

        A resume restores the checkpoint's best (which an fsynced checkpoint now names); a flip of the
        direction (reviews only) promotes the best good node in the other direction. Metrics and
        verdicts of reviewed nodes never change, so a node that is the best in neither direction never
        will be.
        """
        if not self._listed:  # kept by an earlier session of this trial
            suffix = KEPT_SUBMISSION_SUFFIX
            with os.scandir(self.layout.node_logs) as entries:
                self._kept |= {e.name.removesuffix(suffix) for e in entries if e.name.endswith(suffix)}
            self._listed = True
        needed = {self.ckpt.best_node_id}
        if self.ckpt.direction_source != "task":
            for lower in (True, False):
                best = Journal(self.journal.good_nodes, lower).best_node()
                needed.add(best.id if best else None)
        for node_id in self._kept - needed:
            kept_submission(self.layout.trial_dir, node_id).unlink(missing_ok=True)
        self._kept &= needed

    def _repromote(self, exclude: Node) -> None:
        """After a flip: the new best's kept CSV becomes the graded file, if it is whole (a machine
        crash may have lost or cut it: then the best stays, and the next better node replaces it)."""
        best = self.journal.best_node()
        if best is None or best.id == self.ckpt.best_node_id:
            return
        kept = self._kept_submission(best)
        if not kept.is_file() or file_sha256(kept) != best.submission_sha256:
            log.warning("the kept submission of node %s is missing or damaged: not promoted", best.id[:8])
            return
        link_atomic(kept, self.layout.submission_csv, durable=True)
        write_text_atomic(self.layout.best_solution, best.code)
        self.ckpt.best_node_id = best.id

    def restore(self) -> None:
        """On resume: the graded file and best_solution.py are the checkpoint's best node's again, when a
        kill (or a machine crash) came between promoting a node and the checkpoint naming it."""
        best = self.journal.get(self.ckpt.best_node_id)
        graded = self.layout.submission_csv
        if best is None or best.submission_sha256 is None:
            return
        if graded.is_file() and file_sha256(graded) == best.submission_sha256:
            return
        kept = self._kept_submission(best)
        if not kept.is_file() or file_sha256(kept) != best.submission_sha256:
            log.warning("the graded file is not node %s's and no whole copy of it is kept", best.id[:8])
            return
        log.warning("the graded file was not node %s's (a promotion cut short): restored", best.id[:8])
        link_atomic(kept, graded, durable=True)
        write_text_atomic(self.layout.best_solution, best.code)

    def promote(self, node: Node) -> None:
        """Copy the new best's submission and code out atomically, before the checkpoint names it.

        The copy comes from the agent's staged file (taken from the workspace without following links),
        never from the workspace itself; its hash is the node's, which the grader checks.
        """
        # Kept in any case (a link, no copy): a kill before the checkpoint names this node leaves the
        # graded file this node's while the checkpoint names the last best, which `restore` relinks.
        self._keep_submission(node)
        link_atomic(self.layout.staged_submission, self.layout.submission_csv, durable=True)
        if file_sha256(self.layout.submission_csv) != node.submission_sha256:
            raise RuntimeError("the copied submission does not match the staged one")
        write_text_atomic(self.layout.best_solution, node.code)
        self.ckpt.best_node_id = node.id
        log.info("new best node %s: metric %s", node.id[:8], node.metric)
