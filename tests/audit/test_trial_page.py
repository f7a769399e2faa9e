"""Trial pages: the search tree, node details, best path, timeline, and escaping of untrusted text."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from browser import dump_dom
from markupsafe import escape

from mle_world.agent.events import EventLog
from mle_world.agent.journal import Checkpoint, JournalWriter, Node, save_checkpoint
from mle_world.audit.pages import num, render_trial_page, yesno
from mle_world.audit.trialview import layout, load_trial_view, node_status
from mle_world.records import DowntimeEvent, ExecutionEvent, LLMCallEvent, Prediction, PredictionEvent

REPO = Path(__file__).resolve().parents[2]
HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "run_paper.py"), *args], capture_output=True, text=True)


def node(node_id: str, step: int, stage: str, parent: str | None, **fields: object) -> Node:
    return Node.model_validate({"id": node_id, "step": step, "stage": stage, "parent_id": parent, **fields})


def make_trial(root: Path) -> Path:
    """A draft that fails, its debug fix, two improvements (one skipped by the gate), hostile text everywhere."""
    trial = root / "runs" / "wm-point" / "iris_seed1"
    trial.mkdir(parents=True)
    nodes = [
        node("d" * 32, 0, "draft", None, code="print(1)\n", plan=f"draft plan {HOSTILE}", executed=True,
             is_buggy=True, term_out=f"Traceback {HOSTILE}", exc_type="ValueError", ctime=1000.0),
        node("b" * 32, 1, "debug", "d" * 32, code="print(2)\n", executed=True, metric=0.5, ctime=1010.0,
             analysis=f"review says {HOSTILE}"),
        node("i" * 32, 2, "improve", "b" * 32, code=f"# {HOSTILE}\nprint(3)\n", executed=True, metric=0.9,
             ctime=1020.0, gate="execute",
             prediction=Prediction(mode="pointwise", valid=True, p_bug=0.1, p_improves=0.8, rationale=HOSTILE)),
        node("s" * 32, 3, "improve", "b" * 32, code="print(4)\n", skipped=True, gate="skip", ctime=1030.0,
             prediction=Prediction(mode="pointwise", valid=True, p_bug=0.7, p_improves=0.1)),
    ]  # fmt: skip
    raw = Checkpoint(
        trial_id="gated/wm-point/iris/seed1", science_hash="h", lower_is_better=False, nodes=nodes
    )
    save_checkpoint(trial / "journal.json", raw)
    # A field the page has no place for yet (newer journals) still shows up, escaped.
    data = json.loads((trial / "journal.json").read_text())
    data["nodes"][2]["budget_clock_s"] = 42.5
    data["nodes"][2]["note"] = HOSTILE
    (trial / "journal.json").write_text(json.dumps(data))
    events = EventLog(trial / "events.jsonl")
    events.emit(LLMCallEvent(ts=T0 + timedelta(seconds=2), role="coder", model="m", purpose="draft",
                             prompt_tokens=1, completion_tokens=1, latency_s=2.0, outcome="ok"))  # fmt: skip
    events.emit(ExecutionEvent(ts=T0 + timedelta(seconds=5), node_id="d" * 32, kind="full", exec_time_s=3.0,
                               timeout_s=10, timed_out=False, exit_code=1))  # fmt: skip
    events.emit(DowntimeEvent(ts=T0 + timedelta(seconds=5.5), role="world", phase="down", cause="refused"))
    events.emit(DowntimeEvent(ts=T0 + timedelta(seconds=9.5), role="world", phase="up", downtime_s=4.0))
    events.emit(PredictionEvent(ts=T0 + timedelta(seconds=6), node_id="i" * 32, stage="improve",
                                prediction=Prediction(mode="pointwise", valid=True, p_improves=0.8),
                                gate="execute", executed=True,
                                actual_buggy=False, actual_improved=True, actual_metric=0.9))  # fmt: skip
    (trial / "result.json").write_text(json.dumps({
        "trial_id": "gated/wm-point/iris/seed1", "status": "completed", "stop_reason": f"max_steps {HOSTILE}",
        "time_used_s": 10.0, "llm_time_s": 2.0, "exec_time_s": 3.0, "downtime_s": 4.0, "steps": 4,
        "executed": 3, "skipped": 1,
    }))  # fmt: skip
    (trial / "status.json").write_text(
        json.dumps({"trial_id": "gated/wm-point/iris/seed1", "state": "succeeded"})
    )
    return trial


def test_page_model_tree_best_path_and_observed_outcome(tmp_path: Path) -> None:
    view = load_trial_view(make_trial(tmp_path))
    assert view.trial_id == "gated/wm-point/iris/seed1"
    by_step = {n.node.step: n for n in view.nodes}
    assert [by_step[i].status for i in range(4)] == ["buggy", "good", "good", "skipped"]
    # Best = the improvement (0.9, higher is better); its path runs back through the debug fix to the draft.
    assert [by_step[i].on_best_path for i in range(4)] == [True, True, True, False]
    assert by_step[2].is_best and not by_step[1].is_best
    assert by_step[2].observed.improved is True and by_step[3].observed.executed is False
    assert "-print(2)" in by_step[2].diff and "+print(3)" in by_step[2].diff and by_step[0].diff == ""
    classes = dict((line, cls) for cls, line in by_step[2].diff_lines)
    assert classes["-print(2)"] == "del" and classes["+print(3)"] == "add" and by_step[0].diff_lines == []
    assert [cls for cls, line in by_step[2].diff_lines if line.startswith("@@")] == ["hunk"]
    assert dict(by_step[2].extra)["budget_clock_s"] == "42.5"
    assert view.counts == {
        "nodes": 4,
        "buggy": 1,
        "good": 2,
        "skipped": 1,
        "draft": 1,
        "debug": 1,
        "improve": 2,
    }
    assert view.timeline is not None
    assert [(s.lane, s.start, s.end) for s in view.timeline.spans] == [
        ("LLM coder", 0.0, 2.0),
        ("downtime", 5.5, 9.5),
        ("execution", 2.0, 5.0),
    ]
    assert view.timeline.lanes == ("execution", "LLM coder", "downtime")
    # Downtime is outside the time used (the budget clock paused), so "other" is not reduced by it.
    assert dict(view.timeline.totals) == {
        "LLM": 2.0,
        "execution": 3.0,
        "other": 5.0,
        "downtime (not budgeted)": 4.0,
    }


def test_untrusted_text_appears_as_text_not_markup(tmp_path: Path) -> None:
    page = render_trial_page(load_trial_view(make_trial(tmp_path)), index_href="../index.html")
    assert "<script" not in page.lower() and "<img" not in page.lower()
    escaped = str(escape(HOSTILE))
    # plan, output, review, code, diff, rationale, stop reason and the unknown field: each shown as text.
    assert page.count(escaped) >= 7, page.count(escaped)
    assert "&lt;script&gt;" in page


def test_browser_shows_untrusted_text_and_runs_no_script(tmp_path: Path) -> None:
    page = tmp_path / "trial.html"
    page.write_text(render_trial_page(load_trial_view(make_trial(tmp_path))))
    dom = dump_dom(page.as_uri())
    # The DOM Chromium built has no script or img element; the hostile text is there as text.
    assert "<script" not in dom and "<img" not in dom
    assert dom.count('&lt;script&gt;alert("pwned")&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;') >= 7


def test_tree_layout_puts_parents_over_children_and_survives_deep_chains() -> None:
    nodes = [node("r", 0, "draft", None), node("a", 1, "improve", "r"), node("b", 2, "improve", "r")]
    coords = layout(nodes)
    assert coords["r"][0] == (coords["a"][0] + coords["b"][0]) / 2 and coords["r"][1] < coords["a"][1]
    chain = [node("0", 0, "draft", None), *(node(str(i), i, "debug", str(i - 1)) for i in range(1, 3000))]
    assert len(layout(chain)) == 3000


def test_page_renders_what_it_can_read(tmp_path: Path) -> None:
    trial = tmp_path / "t"
    trial.mkdir()
    (trial / "journal.json").write_text("{not json")
    (trial / "events.jsonl").write_text('{"type": "llm_call"}\nnot json\n')
    view = load_trial_view(trial)
    assert view.nodes == [] and view.problems == [
        "journal.json: unreadable (JSONDecodeError)",
        "events.jsonl: 2 unreadable lines",
    ]
    assert "journal.json: unreadable" in render_trial_page(view)


def test_show_writes_the_page_and_rejects_a_dir_that_is_no_trial(tmp_path: Path) -> None:
    trial = make_trial(tmp_path)
    proc = cli("show", str(trial))
    assert proc.returncode == 0, proc.stderr
    page = trial / "trial.html"
    assert proc.stdout.strip() == page.as_uri()
    text = page.read_text()
    assert re.search(r"<title>Trial gated/wm-point/iris/seed1</title>", text)
    assert 'href="#n-' + "b" * 32 + '"' in text
    assert "← sweep report" not in text  # no audit yet
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "index.html").write_text("<title>Sweep report</title>")
    assert cli("show", str(trial)).returncode == 0
    back = re.search(r'href="([^"]+)">← sweep report', page.read_text())
    assert back is not None and (page.parent / back[1]).resolve() == tmp_path / "audit" / "index.html"
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = cli("show", str(empty))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a trial dir" in bad.stderr
    assert cli("show", str(tmp_path / "nope")).returncode == 2


def test_show_prints_a_long_url_on_one_line(tmp_path: Path) -> None:
    """Piped or logged (no terminal), rich broke lines at 80 columns, mid-path: the URL was unusable."""
    trial = make_trial(tmp_path / ("a-long-directory-name-" * 6))
    proc = cli("show", str(trial))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (trial / "trial.html").as_uri() + "\n"


@pytest.mark.parametrize("name", ["trial.html", "sub/dir/page.html"])
def test_show_out(tmp_path: Path, name: str) -> None:
    trial = make_trial(tmp_path)
    proc = cli("show", str(trial), "--out", str(tmp_path / name))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).stat().st_mode & 0o044 == 0o044


def test_show_a_running_trial_whose_latest_nodes_are_only_in_the_journal_log(tmp_path: Path) -> None:
    trial = tmp_path / "running"
    trial.mkdir()
    writer = JournalWriter(trial / "journal.json", None)
    first = [node("r" * 32, 0, "draft", None, executed=True, metric=0.4)]
    writer.save(Checkpoint(trial_id="gated/aide/iris/seed1", science_hash="h", nodes=first))
    more = [*first, node("c" * 32, 1, "improve", "r" * 32, executed=True, metric=0.6)]
    writer.save(Checkpoint(trial_id="gated/aide/iris/seed1", science_hash="h", nodes=more))
    assert not (trial / "journal.json").exists() and (trial / "journal.jsonl").is_file()
    proc = cli("show", str(trial))
    assert proc.returncode == 0, proc.stderr
    assert "2 nodes: 1 draft, 0 debug, 1 improve" in (trial / "trial.html").read_text()


def test_newer_journal_fields_budget_clock_and_gate_verdicts(tmp_path: Path) -> None:
    """Journals that record the budget clock and the gate's verdicts show them; older ones still render."""
    trial = make_trial(tmp_path)
    data = json.loads((trial / "journal.json").read_text())
    for i, raw in enumerate(data["nodes"]):
        raw["budget_time_s"] = 100.0 * i
    data["nodes"][2]["prediction"].update({"rejected": False, "counterfactual_gate": "execute"})
    data["nodes"][2].update({"metric_mismatch": True, "printed_metric": 0.91, "reviewer_metric": 0.9})
    (trial / "journal.json").write_text(json.dumps(data))
    view = load_trial_view(trial)
    assert view.time_axis == "budget time" and [n.offset_s for n in view.nodes] == [0.0, 100.0, 200.0, 300.0]
    assert (view.nodes[2].rejected, view.nodes[2].counterfactual_gate) == (False, "execute")
    page = render_trial_page(view)
    assert "accepts; gated would: execute" in page and "budget time" in page and "5m00s" in page
    assert "mismatch: script printed 0.91, reviewer said 0.9" in page
    skipped = node("x", 5, "improve", "b" * 32, skipped=True)
    assert (
        node_status(skipped, "not_selected") == "not_selected" and node_status(skipped, "skip") == "skipped"
    )


def test_numbers_and_verdicts_on_a_page_read_as_the_template_formatted_them() -> None:
    # Filters now, macros before: the same text ("%.*g" of jinja2's format filter; a dash for unknown).
    assert [num(None), num(0.123456), num(0.123456, 3), num(5), num(1e20, 3), num(float("nan"))] == [
        "–", "0.1235", "0.123", "5", "1e+20", "nan"
    ]  # fmt: skip
    assert [yesno(None), yesno(True), yesno(False)] == ["–", "yes", "no"]
