"""The bytes a hostile script and hostile model replies produce, followed past the sandbox to every sink.

One real sweep through run_paper.py (local pool, process runtime): the coder's plan, the script's
output, the names of the files it creates, its exception, the review and a server's error all carry
terminal escape sequences, rich markup, HTML, markdown beacons and spreadsheet formulas. Then the
launcher's terminal, `status`, `grade`, the agent's log, `audit` (report.md, CSVs, index.html) and
`show` (the trial page) are checked for each. Writes only under pytest's tmp paths.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from browser import dump_dom
from e2ekit import REPO, cli
from fakeserver import FakeOpenAIServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.shared_setup, pytest.mark.timeout(600)]

ESC = "\x1b]52;c;cHduZWQ=\x07\x1b]0;OWNED\x1b\\\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b[2K\x1b[1A"
"""OSC 52 (the clipboard), OSC 0 (the title), OSC 8 (a hyperlink), erase the line and move up."""
FORGED = "\r[launch] 1 trials: succeeded 1\u202e"
MARKUP = "[link=https://evil.example/]x[/link] [/] [bold"
HTML = "<img src=https://beacon.example/h.png><script>alert(1)</script>"
MARKDOWN = "![b](https://beacon.example/m.png) | cell | <img src=https://beacon.example/md.png>"
FORMULA = '=HYPERLINK("https://evil.example/","x")'
PAYLOAD = ESC + FORGED + MARKUP + HTML + MARKDOWN
BAD_BYTES = ("\x1b", "\x07", "\x9b", "\r", "\u202e")

SCRIPT = r"""
import os, shutil, sys
P = {payload!r}
print(P)
print(P, file=sys.stderr)
for name in (P.replace("/", "_")[:200], "=cmd|' /C calc'!A0.csv", "line\nbreak\x1b[31m.csv"):
    for where in ("working", "submission"):
        try:
            open(os.path.join(where, name), "w").write(P)
        except OSError as error:
            print("could not create", repr(name), error)
try:
    os.mkdir(b"working/bad\xff\xfename")
except OSError:
    pass
shutil.copy("input/sample_submission.csv", "submission/submission.csv")
print("Validation metric (accuracy, higher is better): 0.5")
if "--debug" not in sys.argv and {fail}:
    raise ValueError({formula!r} + P)
"""


def coder_reply(fail: bool) -> Reply:
    code = SCRIPT.format(payload=PAYLOAD, formula=FORMULA, fail=fail)
    return Reply(content=f"{FORMULA} {PAYLOAD}\n\n```python\n{code}\n```\n", usage=(100, 100))


def review(request: dict[str, Any]) -> Reply:
    answer = {
        "is_bug": False,
        "summary": f"{FORMULA} {PAYLOAD}",
        "metric": 0.5,
        "lower_is_better": False,
        "has_csv_submission": True,
    }
    return Reply(tool_call=("submit_review", answer), usage=(50, 10))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("hostile-output")
    data = tmp / "data"
    demo = REPO / "src" / "mle_world" / "configs" / "demo.yaml"
    prep = cli("prepare", "--config", str(demo), "--data-dir", str(data), "--tasks", "iris-species")
    assert prep.returncode == 0, prep.stderr
    paper = yaml.safe_load(demo.read_text())
    paper["tasks"] = ["iris-species"]
    paper["configurations"] = {"aide": paper["configurations"]["aide"]}
    paper["budget"].update(
        {"max_steps": 3, "time_limit_s": 300, "exec_timeout_s": 60, "debug_timeout_s": 30, "min_step_s": 1}
    )
    paper["search"].update({"num_drafts": 3})
    (tmp / "paper.yaml").write_text(yaml.safe_dump(paper))
    out = tmp / "out"
    with (
        FakeOpenAIServer(FORMULA) as coder,  # the model id it serves is a formula too
        FakeOpenAIServer("feedback-model", default=review) as feedback,
        FakeOpenAIServer("world-model", default="{}") as world,
    ):
        # A good draft, a draft that raises, then a server error quoting the payload ends the trial.
        coder.push(coder_reply(False), coder_reply(True), Reply(status=401, error_message=PAYLOAD))
        argv = [
            *("--config", str(tmp / "paper.yaml"), "--regime", "ungated"),
            *("--output-dir", str(out), "--data-dir", str(data), "--grade"),
            *("--runtime", "process", "--backend", "local", "--n-workers", "1", "--gpu-device", "none"),
            *("--no-progress", "--no-endpoint-check"),
            *("--coder-url", coder.url, "--feedback-url", feedback.url, "--world-url", world.url),
        ]
        env = {**os.environ, "LANG": "C.UTF-8"}
        launch = subprocess.run(
            [sys.executable, str(REPO / "run_paper.py"), *argv],
            capture_output=True,
            timeout=500,
            env=env,
            check=False,
        )
    found = sorted(out.glob("runs/*/*/status.json"))
    assert found, (launch.stdout + launch.stderr).decode(errors="replace")[-3000:]
    trial = found[0].parent
    yield {"out": out, "data": data, "launch": launch, "trial": trial, "env": env}


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        capture_output=True,
        timeout=300,
        env=env,
        check=False,
    )


def terminal_clean(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    return [repr(c) for c in BAD_BYTES if c in text]


def test_the_payload_reached_the_stored_records(sweep):
    """The attack did happen: the records keep the bytes as they were (nothing mangled on disk)."""
    trial = sweep["trial"]
    journal = json.loads((trial / "journal.json").read_text())
    assert any(PAYLOAD in node["term_out"] for node in journal["nodes"]), journal["nodes"]
    assert any(FORMULA + ESC in (node.get("exc_info") or "") for node in journal["nodes"])
    status = json.loads((trial / "status.json").read_text())
    assert status["state"] == "failed" and ESC in (status.get("cause") or ""), status


def test_the_launchers_terminal_gets_no_escape_sequence(sweep):
    launch = sweep["launch"]
    assert not terminal_clean(launch.stdout + launch.stderr), (launch.stdout + launch.stderr)[-3000:]


def test_status_shows_the_cause_inert(sweep):
    proc = run("status", str(sweep["out"]), env={**sweep["env"], "COLUMNS": "400"})
    assert proc.returncode in (0, 1), proc.stderr
    assert b"failed" in proc.stdout and not terminal_clean(proc.stdout + proc.stderr), proc.stdout
    assert b"\\x1b]52" in proc.stdout  # shown as text


def test_status_of_an_output_dir_whose_path_looks_like_markup(sweep, tmp_path):
    """The table's title names the output dir: a path with '[/]' in it raised MarkupError (a traceback)."""
    odd = tmp_path / "o[" / "]x"
    odd.parent.mkdir()
    shutil.copytree(sweep["out"], odd, symlinks=True)
    proc = run("status", str(odd), env={**sweep["env"], "COLUMNS": "400"})
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert str(odd).encode() in proc.stdout, proc.stdout


def test_the_agent_log_holds_no_escape_sequence(sweep):
    log = (sweep["trial"] / "logs" / "agent.log").read_bytes()
    assert b"\\x1b]52" in log and not terminal_clean(log), log[-3000:]


def test_audit_outputs_are_inert(sweep):
    """report.md: no tag, link, image or escape sequence from the cause; CSVs: no formula; HTML: escaped."""
    out = sweep["out"]
    proc = run("audit", str(out), env=sweep["env"])
    assert proc.returncode == 0, proc.stderr
    assert not terminal_clean(proc.stdout + proc.stderr)
    report = (out / "audit" / "report.md").read_text()
    assert "evil.example" in report  # the cause is reported, as text
    assert not terminal_clean(report.encode()), report
    for needle in ("<img", "<script", "![b](", "| cell |"):
        assert needle not in report, needle
    for path in [*out.glob("audit/*.csv"), *out.glob("costs/*.csv")]:
        for row in csv.reader(path.read_text().splitlines()):
            assert not [c for c in row if c[:1] in ("=", "+", "@") or c.startswith("-") and not _number(c)]
    for path in [out / "audit" / "index.html", *out.glob("audit/trials/*.html")]:
        page = path.read_text().lower()
        assert "<script" not in page and "<img src=https" not in page, path


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_show_writes_an_inert_trial_page(sweep):
    proc = run(
        "show", str(sweep["trial"]), "--out", str(sweep["trial"].parent / "page.html"), env=sweep["env"]
    )
    assert proc.returncode == 0, proc.stderr
    page = (sweep["trial"].parent / "page.html").read_text().lower()
    assert "&lt;script&gt;" in page and "<script" not in page and "<img src=https" not in page
    assert not terminal_clean(proc.stdout + proc.stderr)
    # As Chromium built it: the payload is text, no element of it exists.
    dom = dump_dom((sweep["trial"].parent / "page.html").as_uri()).lower()
    assert "&lt;script&gt;alert(1)" in dom and "<script" not in dom and 'beacon.example/h.png"' not in dom
    assert '<img src="https' not in dom
