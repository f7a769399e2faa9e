"""Model ids a hostile server names (an <img> beacon, OSC 52 and OSC 0 escapes, a right-to-left override,
a spreadsheet formula), followed from /v1/models to every output that shows them.

Real commands against the scripted servers on loopback: `check-endpoints` (one server's error text
quoting the id, too); a sweep continued with the
hostile servers (`--allow-provenance-change`, so the warning names their ids); `status`; `audit`
(report.md, the CSVs, index.html). launch.json keeps each id exactly. Writes only under pytest's tmp
paths.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import scripted
import yaml
from e2ekit import REPO, cli
from fakeserver import HOSTILE_FORMULA_ID, HOSTILE_MODEL_ID, FakeOpenAIServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.shared_setup, pytest.mark.timeout(900)]

RAW = ("\x1b", "\x07", "\x9b", "\u202e")
"""What a terminal (or `cat` on a file) would interpret: ESC, BEL, the 8-bit CSI, the bidi override."""
BEACON = "<img src=http"
IDS = {"coder": HOSTILE_MODEL_ID, "feedback": HOSTILE_FORMULA_ID, "world": HOSTILE_MODEL_ID}
TASKS = ("iris-species", "diabetes-progression")
WIDE = {**os.environ, "COLUMNS": "400"}
"""rich wraps at the terminal's width: one line per message, so the tests can find a message."""


def raw(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


@contextlib.contextmanager
def servers(ids: dict[str, str]) -> Iterator[list[str]]:
    """The three roles on loopback, each serving its id in `ids`; yields the URL flags."""
    with (
        FakeOpenAIServer(ids["coder"], default=scripted.coder()) as coder,
        FakeOpenAIServer(ids["feedback"], default=scripted.review) as feedback,
        FakeOpenAIServer(ids["world"], default=scripted.world()) as world,
    ):
        yield ["--coder-url", coder.url, "--feedback-url", feedback.url, "--world-url", world.url]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A sweep launched on benign servers, continued on the hostile ones; every command's output."""
    tmp = tmp_path_factory.mktemp("hostile-endpoints")
    data, out = tmp / "data", tmp / "out"
    demo = REPO / "src" / "mle_world" / "configs" / "demo.yaml"
    prep = cli("prepare", "--config", str(demo), "--data-dir", str(data), "--tasks", ",".join(TASKS))
    assert prep.returncode == 0, prep.stderr
    paper = yaml.safe_load(demo.read_text())
    paper["budget"].update({"max_steps": 1, "time_limit_s": 120, "exec_timeout_s": 30, "min_step_s": 1})
    paper["search"].update({"num_drafts": 1})
    config = tmp / "paper.yaml"
    config.write_text(yaml.safe_dump(paper))

    def launch(task: str, urls: list[str], *extra: str):  # type: ignore[no-untyped-def]
        return cli(
            "--config", str(config), "--runtime", "process", "--backend", "local", "--data-dir", str(data),
            "--gpu-device", "none", "--no-progress", "--regime", "ungated", "--configs", "aide",
            "--tasks", task, "--output-dir", str(out), "--grade", *urls, *extra, env=WIDE,
        )  # fmt: skip

    runs: dict[str, Any] = {"out": out}
    benign = {role: f"{role}-model" for role in IDS}
    with servers(benign) as urls:
        runs["first"] = launch(TASKS[0], urls)
    assert runs["first"].returncode == 0, runs["first"].stderr
    with servers(IDS) as urls:
        check = ("check-endpoints", "--config", str(config), *urls)
        runs["check"] = cli(*check, env=WIDE)
        runs["unserved"] = cli(*check, "--coder-model", "other", env=WIDE)
        refusal = Reply(status=400, error_message=HOSTILE_MODEL_ID)  # an error text that quotes the id
        with FakeOpenAIServer(HOSTILE_MODEL_ID, default=refusal) as erring:
            runs["erring"] = cli(*check, "--coder-url", erring.url, env=WIDE)
        runs["refused"] = launch(TASKS[1], urls)
        runs["continued"] = launch(TASKS[1], urls, "--allow-provenance-change")
    assert runs["continued"].returncode == 0, runs["continued"].stderr[-3000:]
    runs["status"] = cli("status", str(out), "--costs", env=WIDE)
    trial = f"ungated/aide/{TASKS[1]}/seed34"
    runs["status_trial"] = cli("status", str(out), "--trial", trial, env=WIDE)
    runs["audit"] = cli("audit", str(out), env=WIDE)
    assert runs["audit"].returncode == 0, runs["audit"].stderr
    return runs


def test_launch_json_keeps_the_exact_ids(sweep):
    record = json.loads((sweep["out"] / "launch.json").read_text(encoding="utf-8"))
    assert {e["role"]: tuple(e["served_models"]) for e in record["endpoints"]} == {
        role: (model,) for role, model in IDS.items()
    }
    assert record["earlier_launches"][0]["served_models"] == [f"{role}={role}-model" for role in sorted(IDS)]


@pytest.mark.parametrize(
    "command", ["check", "unserved", "erring", "refused", "continued", "status", "status_trial", "audit"]
)
def test_terminal_output_shows_the_ids_escaped(sweep, command):
    proc = sweep[command]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not raw(proc.stdout + proc.stderr), (proc.stdout + proc.stderr)[-3000:]


def test_the_ids_are_shown_as_text_where_they_are_named(sweep):
    """Escaped, not dropped: the probe table, the refusals and the provenance warning still name them."""
    shown = "\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;OWNED\\x07\\u202e"
    assert shown in sweep["check"].stdout, sweep["check"].stdout
    assert sweep["unserved"].returncode == 2 and shown in sweep["unserved"].stderr, sweep["unserved"].stderr
    assert sweep["refused"].returncode == 2 and shown in sweep["refused"].stderr, sweep["refused"].stderr
    erring = sweep["erring"]
    assert erring.returncode == 2 and "completion failed: HTTP 400: <img" in erring.stderr, erring.stderr
    assert shown in erring.stderr, erring.stderr
    warning = " ".join(sweep["continued"].stderr.split())  # rich wraps a line at word boundaries
    expected = "WARNING: --allow-provenance-change: coder model coder-model -> <img src=http://127.0.0.1:9/x>"
    assert expected + shown in warning, warning


def test_report_md_renders_no_tag_link_or_escape(sweep):
    report = (sweep["out"] / "audit" / "report.md").read_text(encoding="utf-8")
    assert not raw(report), report
    provenance = next(line for line in report.splitlines() if "models coder=" in line)
    assert "&lt;img src=http\\://127.0.0.1:9/x&gt;\\\\x1b\\]52" in provenance, provenance
    for needle in (BEACON, "http://", "](", "`"):
        assert needle not in provenance, (needle, provenance)


def test_cost_csvs_neutralise_the_formula_and_escape_the_controls(sweep):
    out = sweep["out"]
    rows = list(csv.DictReader((out / "costs" / f"aide.{TASKS[1]}.seed34.csv").open(encoding="utf-8")))
    models = {row["role"]: row["model"] for row in rows}
    assert models["feedback"].startswith("'=HYPERLINK("), models
    assert models["coder"].startswith("<img src=http://127.0.0.1:9/x>\\x1b]52;c;"), models
    for path in [*out.glob("costs/*.csv"), out / "audit" / "summary.csv"]:
        text = path.read_text(encoding="utf-8")
        assert not raw(text), (path, text)
        for row in csv.reader(text.splitlines()):
            assert not [cell for cell in row if cell[:1] in ("=", "+", "@")], (path, row)


def test_html_pages_show_the_ids_as_text(sweep):
    """index.html lists the provenance mix; in a browser U+202E would reorder the text after it."""
    index = (sweep["out"] / "audit" / "index.html").read_text(encoding="utf-8")
    assert "coder model coder-model -&gt; &lt;img src=http://127.0.0.1:9/x&gt;\\x1b]52" in index
    for path in [sweep["out"] / "audit" / "index.html", *sweep["out"].glob("audit/trials/*.html")]:
        page = path.read_text(encoding="utf-8")
        assert "<img src=http://" not in page and not raw(page), path
