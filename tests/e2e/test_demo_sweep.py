"""The tiny sweep end to end: both regimes through the real CLI, local pool, sandboxed process
runtime, scripted endpoints over real HTTP, grading, costs, then `audit --strict`."""

from __future__ import annotations

import contextlib
import csv
import functools
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import scripted
from browser import drawn_fraction, dump_dom, screenshot
from e2ekit import REPO, as_from_a_terminal, cli
from fakeserver import FakeOpenAIServer

from mle_world.audit.cache import stamp_of
from mle_world.audit.digest_files import gathered_trials
from mle_world.audit.pages import trial_page_name
from mle_world.launch.endpoints import PROBE_TOOL_NAME
from mle_world.layout import AUDIT_DIGEST_SUFFIX, EVENTS, GATHERED_DIGESTS, STATUS, cost_path, report_beside

pytestmark = pytest.mark.slow
KEYS = {
    "CODER_API_KEY": "sk-coder-e2e-0f3c9a71",
    "FEEDBACK_API_KEY": "sk-feedback-e2e-5be2d8",
    "WORLD_API_KEY": "sk-world-e2e-91d07c4e",
}
"""The endpoint keys of the sweep (demo.yaml's key_env names): the servers require them."""


@pytest.fixture
def servers():  # type: ignore[no-untyped-def]
    with (
        FakeOpenAIServer(
            "coder-model", default=scripted.coder(), required_key=KEYS["CODER_API_KEY"]
        ) as coder,
        FakeOpenAIServer(
            "feedback-model", default=scripted.review, required_key=KEYS["FEEDBACK_API_KEY"]
        ) as feedback,
        FakeOpenAIServer(
            "world-model", default=scripted.world(), required_key=KEYS["WORLD_API_KEY"]
        ) as world,
    ):
        yield {"coder": coder, "feedback": feedback, "world": world}


def run_options(config: Path, data_dir: Path, servers: dict[str, FakeOpenAIServer]) -> list[str]:
    return [
        "--config",
        str(config),
        "--grade",
        "--runtime",
        "process",
        "--backend",
        "local",
        "--data-dir",
        str(data_dir),
        "--n-workers",
        "2",
        "--gpu-device",
        "none",
        "--no-progress",
        "--coder-url",
        servers["coder"].url,
        "--feedback-url",
        servers["feedback"].url,
        "--world-url",
        servers["world"].url,
    ]


def test_tiny_sweep_both_regimes_then_strict_audit(
    tmp_path: Path, data_dir: Path, fast_config: Path, servers: dict[str, FakeOpenAIServer]
) -> None:
    options = run_options(fast_config, data_dir, servers)
    keyed = {**os.environ, **KEYS}
    dry = cli(*options, "--regime", "gated", "--output-dir", str(tmp_path / "dry"), "--dry-run", env=keyed)
    assert dry.returncode == 0 and "mle_world.agent" in dry.stdout, dry.stderr[-3000:]
    for regime in ("ungated", "gated"):
        proc = cli(*options, "--regime", regime, "--output-dir", str(tmp_path / regime), env=keyed)
        assert proc.returncode == 0, proc.stderr[-3000:]
    # A re-run of a subset (nothing left to run in it) keeps the whole sweep in launch.json, where the
    # audit takes the sweep's trials from: the audit below must still find all 12.
    subset = cli(
        *options,
        *("--regime", "ungated", "--output-dir", str(tmp_path / "ungated"), "--tasks", "iris-species"),
        env=keyed,
    )
    assert subset.returncode == 0 and "0 to run" in subset.stderr, subset.stderr[-3000:]

    for regime in ("ungated", "gated"):
        out = tmp_path / regime
        record = json.loads((out / "launch.json").read_text())
        assert len(record["trials"]) == 6 and record["dry_run"] is False
        assert {e["role"]: e["served_models"] for e in record["endpoints"]} == {
            "coder": ["coder-model"],
            "feedback": ["feedback-model"],
            "world": ["world-model"],
        }
        reports = sorted(out.glob("runs/*/*_grading_report.json"))
        assert len(reports) == 6
        for path in reports:
            report = json.loads(path.read_text())
            assert report["regime"] == regime and report["valid_submission"] is True
        assert len(list((out / "costs").glob("*.seed34.csv"))) == 6
        assert (out / "costs" / "summary.csv").exists()

    # The gate skipped what the world model rejected in the gated regime only.
    # (With 4 candidates both regimes record the 3 not executed as skipped: that is by design.)
    def skipped(regime: str, configuration: str) -> int:
        results = (tmp_path / regime / "runs" / configuration).glob("*/result.json")
        return sum(json.loads(p.read_text())["skipped"] for p in results)

    assert skipped("gated", "wm-point") > 0
    assert skipped("ungated", "wm-point") == 0
    assert skipped("gated", "aide") == skipped("ungated", "aide") == 0

    audit = cli("audit", "--strict", str(tmp_path / "ungated"), str(tmp_path / "gated"))
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]
    assert (tmp_path / "ungated" / "audit" / "summary.csv").exists()
    assert (tmp_path / "ungated" / "audit" / "report.md").exists()
    assert list((tmp_path / "ungated" / "audit").glob("*.png"))
    check_pages(tmp_path / "ungated" / "audit")
    check_digests(tmp_path)

    # Tokens in the cost CSVs are exactly the usage the servers sent to the agents (the launcher's
    # endpoint probes, a 1-token completion and a forced probe tool call, are not trial costs).
    sent = {role: s.sent for role, s in servers.items()}
    totals = {role: [0, 0] for role in sent}
    for regime in ("ungated", "gated"):
        for path in (tmp_path / regime / "costs").glob("*.seed34.csv"):
            for row in csv.DictReader(path.open()):
                if row["role"] in totals:
                    totals[row["role"]][0] += int(row["prompt_tokens"] or 0)
                    totals[row["role"]][1] += int(row["completion_tokens"] or 0)
    for role, records in sent.items():
        ok = [r for r in records if r.status == 200 and r.usage and not is_probe(r.request)]
        expected = [sum(r.usage[0] for r in ok if r.usage), sum(r.usage[1] for r in ok if r.usage)]
        assert totals[role] == expected, role

    # The keys reached the servers (each refuses a request without its key) and nothing else: no file
    # of either output dir (launch.json, spec/status/result.json, journals, events, logs, workspaces,
    # submissions, costs, audit) and nothing the dry run printed holds one.
    assert all(r["_auth"] == f"Bearer {KEYS['CODER_API_KEY']}" for r in servers["coder"].chat_requests)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    leaked = [p for p in written if any(key.encode() in p.read_bytes() for key in KEYS.values())]
    assert len(written) > 100 and not leaked, leaked
    assert not any(key in dry.stdout + dry.stderr for key in KEYS.values())


def check_digests(root: Path) -> None:
    """Each ended trial has the audit digest of its dir, report, records, events.jsonl and cost CSV as they
    are, each configuration those digests gathered, and the audit that took them says what one that reads
    the files says."""
    digests = sorted(root.glob(f"*/runs/*/*{AUDIT_DIGEST_SUFFIX}"))
    assert len(digests) == 12
    for digest in digests:
        data = json.loads(digest.read_text())
        trial = digest.with_name(digest.name.removesuffix(AUDIT_DIGEST_SUFFIX))
        task, _, seed = trial.name.rpartition("_seed")
        cost = cost_path(trial.parents[2], trial.parent.name, task, int(seed))
        assert data["events"][0] == stamp_of(str(trial / EVENTS)) and data["cost"][0] == stamp_of(str(cost))
        assert data["dir"][0] == stamp_of(str(trial)) and data["status"][0] == stamp_of(str(trial / STATUS))
        report = report_beside(trial)
        assert data.get("report", [None])[0] == stamp_of(str(report))  # graded, or neither
    # Each launch gathered its configurations' digests when it ended, as they are.
    gathered = sorted(root.glob(f"*/runs/*/{GATHERED_DIGESTS}"))
    assert [g.parent for g in gathered] == sorted({d.parent for d in digests})
    for held in gathered:
        for name, data in (gathered_trials(held) or {}).items():
            assert data == json.loads((held.parent / f"{name}{AUDIT_DIGEST_SUFFIX}").read_text())
        assert gathered_trials(held), held
    audited = root / "ungated" / "audit"
    for digest in [*digests, *gathered]:
        digest.unlink()
    again = cli("audit", "--strict", str(root / "ungated"), str(root / "gated"), "--out", str(root / "again"))
    assert again.returncode == 0, again.stderr[-2000:]
    for name in ("summary.csv", "report.md"):
        assert (root / "again" / name).read_text() == (audited / name).read_text(), name


def check_pages(audit_dir: Path) -> None:
    """index.html and a trial page draw in headless Chromium, from file:// and from a static server."""
    trial_id = "gated/wm-point/iris-species/seed34"
    index = audit_dir / "index.html"
    page = audit_dir / "trials" / trial_page_name(trial_id)
    dom = dump_dom(index.as_uri())
    assert "<title>Sweep report</title>" in dom and "12 trials; 12 with a page." in dom
    assert (
        dom.count('<a href="trials/') == 12 and 'id="brier-table"' in dom and "data:image/png;base64," in dom
    )
    assert 'id="budget-table"' in dom and 'id="gate-table"' in dom
    nodes = json.loads(
        (audit_dir.parents[1] / "gated/runs/wm-point/iris-species_seed34/journal.json").read_text()
    )
    stages = [n["stage"] for n in nodes["nodes"]]
    counts = f"{len(stages)} nodes: {stages.count('draft')} draft, {stages.count('debug')} debug"
    with static_server(audit_dir) as base:
        served = dump_dom(f"{base}/trials/{page.name}")
        back = re.search(r'href="([^"]+)">← sweep report', served)
        assert back is not None
        with urllib.request.urlopen(urllib.parse.urljoin(f"{base}/trials/{page.name}", back[1])) as reply:
            assert b"<title>Sweep report</title>" in reply.read()
    for text in (served, dump_dom(page.as_uri())):
        assert f"<title>Trial {trial_id}</title>" in text and counts in text and "best</span>" in text
        assert "<script" not in text
    for url, name in ((index.as_uri(), "index.png"), (page.as_uri(), "trial.png")):
        png = screenshot(url, name)
        assert drawn_fraction(png) > 0.02, f"{png} looks blank"


@contextlib.contextmanager
def static_server(root: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def is_probe(request: dict) -> bool:  # type: ignore[type-arg]
    choice = request.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("function", {}).get("name") == PROBE_TOOL_NAME
    return request.get("max_tokens") == 1 or forced


def _states(out: Path) -> dict[str, str]:
    states = {}
    for path in out.glob("runs/*/*/status.json"):
        data = json.loads(path.read_text())
        states[data["trial_id"]] = data["state"]
    return states


def test_killed_sweep_resumes_without_rerunning_finished_trials(
    tmp_path: Path, data_dir: Path, fast_config: Path
) -> None:
    out = tmp_path / "ungated"
    with (
        FakeOpenAIServer("coder-model", default=scripted.coder(sleep_s=1.5)) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        servers = {"coder": coder, "feedback": feedback, "world": world}
        argv = [
            sys.executable,
            str(REPO / "run_paper.py"),
            *run_options(fast_config, data_dir, servers),
            "--regime",
            "ungated",
            "--output-dir",
            str(out),
            "--n-workers",
            "1",
            "--tasks",  # one task's three configurations: two finish, the kill lands in the third
            "iris-species",
        ]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and list(_states(out).values()).count("succeeded") < 2:
            time.sleep(0.5)
        assert list(_states(out).values()).count("succeeded") >= 2
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        first = _states(out)
        done = {t for t, s in first.items() if s == "succeeded"}
        assert len(done) == 2  # one worker: the third trial was running when the sweep was killed
        assert "running" not in first.values()
        stamps = {
            t: (out / "runs" / t.split("/")[1] / f"{t.split('/')[2]}_{t.split('/')[3]}" / "result.json")
            .stat()
            .st_mtime_ns
            for t in done
        }

        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
    final = _states(out)
    assert set(final.values()) == {"succeeded"} and len(final) == 3
    for trial_id, stamp in stamps.items():
        run_group, task, seed = trial_id.split("/")[1:]
        assert (out / "runs" / run_group / f"{task}_{seed}" / "result.json").stat().st_mtime_ns == stamp
        status = json.loads((out / "runs" / run_group / f"{task}_{seed}" / "status.json").read_text())
        assert status["attempt"] == 1
