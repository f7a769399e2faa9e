"""The digests gathered per configuration when a launch ends (`audit/digest_files.py`): a first audit reads
one file per configuration, neither a trial's digest nor its files, and says what an audit without any
digest says; a gathered file that grew stale, of other code or garbage serves nothing wrong.

Runs the CLI in process (`cli` fixture) for `digest`; writes small synthetic sweeps (tests/support/synthetic.py: digests gathered as a launch
gathers them) and their audit dirs under tmp_path.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from clikit import Cli
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import run_audit
from mle_world.audit.cache import open_parsed_inputs, stamp_of
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import parsers_digest, write_trial_digest
from mle_world.audit.digest_files import gather_digests, gathered_trials, read_gathered
from mle_world.records import TrialStatus
from mle_world.storage import write_model

OUTPUTS = ("summary.csv", "report.md")


def outputs(dirs: list[Path], out: Path) -> dict[str, str]:
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False) == 0
    return {name: (out / name).read_text() for name in OUTPUTS}


def gathered(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob(f"runs/*/{layout.GATHERED_DIGESTS}"))


def held(path: Path) -> dict[str, Any]:
    trials = gathered_trials(path)
    assert trials is not None, path
    return trials


def write_gathered(path: Path, trials: dict[str, Any], header: str | None = None) -> None:
    """A gathered file as `gather_digests` writes one (a line per trial: its name, a tab, its digest)."""
    lines = [(parsers_digest() if header is None else header).encode()]
    lines += [name.encode() + b"\t" + orjson.dumps(digest) for name, digest in trials.items()]
    path.write_bytes(b"\n".join(lines) + b"\n")


def trial_digests(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob(f"runs/*/*{layout.AUDIT_DIGEST_SUFFIX}"))


def collected(dirs: list[Path]) -> tuple[int, set[str]]:
    """How many input files a first audit's collection reads (not taken from a digest), and the digest files
    it opened."""
    parsed = open_parsed_inputs(None)
    load_sweep(dirs, parsed)
    return parsed.read, {p for p in parsed.seen if "digest" in Path(p).name}


def without_digests(dirs: list[Path], out: Path) -> dict[str, str]:
    """`outputs` with every digest, gathered or not, gone (put back afterwards)."""
    kept = {p: p.read_bytes() for p in [*gathered(dirs), *trial_digests(dirs)]}
    for p in kept:
        p.unlink()
    try:
        return outputs(dirs, out)
    finally:
        for p, data in kept.items():
            p.write_bytes(data)


def test_a_first_audit_reads_one_gathered_file_per_configuration_and_says_the_same(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 400, events=True, seed=3)
    files = gathered(dirs)
    assert [p.parent for p in files] == sorted(
        {p.parent for p in trial_digests(dirs)}
    )  # one per configuration
    per_file = {p: set(held(p)) for p in files}
    assert sum(map(len, per_file.values())) == len(trial_digests(dirs)) > 300
    read, opened = collected(dirs)
    assert (read, opened) == (0, {str(p) for p in files})
    assert outputs(dirs, tmp_path / "audit") == without_digests(dirs, tmp_path / "no-digests")


def test_a_stale_gathered_digest_serves_only_what_still_stands_and_a_later_trial_its_own(
    tmp_path: Path,
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=4)
    gathered_at_end = {p: p.read_bytes() for p in gathered(dirs)}
    digests = [
        d
        for d in trial_digests(dirs)
        if d.with_name(d.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX)).is_dir()
    ]
    appended, regraded, later = (
        d.with_name(d.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX)) for d in digests[:3]
    )
    line = (appended / layout.EVENTS).read_text().splitlines()[0]
    with (appended / layout.EVENTS).open("a") as handle:  # the trial ran again after the launch ended
        handle.write(line.replace('"p_improves": ', '"p_improves": 0.002 + 0 * ') + "\n")
    report = layout.report_beside(regraded)
    graded = json.loads(report.read_text())
    graded.update(gold_medal=True, any_medal=True, score=0.99)
    tmp = report.with_name(".tmp.json")
    tmp.write_text(json.dumps(graded))
    os.replace(tmp, report)  # graded again, its own digest written again; the gathered one not
    write_trial_digest(regraded, None)
    path = later.parent / layout.GATHERED_DIGESTS  # `later` ended after the launch that gathered the others
    data = held(path)
    del data[later.name]
    write_gathered(path, data)
    read, opened = collected(dirs)
    # The appended events.jsonl (and the dir, whose stamp did not change, still served) and the regraded
    # report are read; the later trial's own digest is opened, and serves.
    assert read == 2
    assert opened == {str(p) for p in gathered_at_end} | {str(layout.digest_beside(later))}
    assert outputs(dirs, tmp_path / "audit") == without_digests(dirs, tmp_path / "no-digests")


def test_a_gathered_file_of_other_code_or_garbage_is_ignored(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 200, events=True, seed=5)
    files = gathered(dirs)
    expected = without_digests(dirs, tmp_path / "expected")
    write_gathered(files[0], held(files[0]), header="0" * 64)
    files[1].write_text("{not json")
    files[2].write_text('{"digest": null, "trials": []}')
    broken = held(files[3])
    for digest in broken.values():
        digest["report"] = ["not a stamp", 42]
        digest["dir"] = 7
    broken["../../escape"] = {"report": [[1, 2, 3, 4], "{}"]}
    write_gathered(files[3], broken)
    with files[3].open("ab") as handle:  # lines no digest is: not JSON, no tab, a name alone
        handle.write(b"task-00_seed0x\t{not json\nno tab at all\n\t\n")
    read, opened = collected(dirs)
    # The first three configurations' trials fall back to their own digests; the broken one's trials read
    # their reports and list their dirs (their events and costs still served).
    assert {p for p in opened if p.endswith(layout.AUDIT_DIGEST_SUFFIX)} == {
        str(p) for p in trial_digests(dirs) if p.parent in {f.parent for f in files[:3]}
    }
    trials_of_broken = {n: d for n, d in broken.items() if n != "../../escape"}
    with_dir = [n for n in trials_of_broken if (files[3].parent / n).is_dir()]
    assert read == len(trials_of_broken) + len(with_dir)
    assert outputs(dirs, tmp_path / "audit") == expected


def test_gathering_leaves_out_what_the_audit_would_ignore_and_removes_an_empty_file(tmp_path: Path) -> None:
    (out,) = make_sweep(tmp_path / "sweep", 60, events=True, seed=6, regimes=("gated",), gathered=False)
    configurations = sorted({p.parent for p in trial_digests([out])})
    cfg = configurations[-1]
    digests = sorted(cfg.glob(f"*{layout.AUDIT_DIGEST_SUFFIX}"))
    digests[0].write_text("{not json")
    other = json.loads(digests[1].read_text())
    other["digest"] = "0" * 64
    digests[1].write_text(json.dumps(other))
    (cfg / f".hidden{layout.AUDIT_DIGEST_SUFFIX}").write_text(digests[2].read_text())
    # Of this code, but on several lines (edited): the gathered file's line split would cut it.
    digests[3].write_text(json.dumps(json.loads(digests[3].read_text()), indent=1))
    written = gather_digests(out)
    assert written == [c / layout.GATHERED_DIGESTS for c in configurations]
    data = held(cfg / layout.GATHERED_DIGESTS)
    names = {d.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX) for d in [digests[2], *digests[4:]]}
    assert set(data) == names
    # Each as the trial wrote it.
    assert all(
        data[n] == orjson.loads((cfg / f"{n}{layout.AUDIT_DIGEST_SUFFIX}").read_bytes()) for n in names
    )
    for digest in cfg.glob(f"*{layout.AUDIT_DIGEST_SUFFIX}"):
        digest.unlink()
    assert cfg / layout.GATHERED_DIGESTS not in gather_digests(out)
    assert not (cfg / layout.GATHERED_DIGESTS).exists()
    assert gather_digests(tmp_path / "no-such-dir") == []
    # A configuration whose gathered file cannot be written or removed (a dir in its place) is left as
    # it is, and the others are gathered.
    blocked, empty = configurations[0] / layout.GATHERED_DIGESTS, cfg / layout.GATHERED_DIGESTS
    blocked.unlink()
    blocked.mkdir()
    empty.mkdir()
    others = [c / layout.GATHERED_DIGESTS for c in configurations[1:-1]]
    assert gather_digests(out) == others and blocked.is_dir() and empty.is_dir()
    assert not list(configurations[0].glob(f".{layout.GATHERED_DIGESTS}.*"))  # no temp file left


def digest(cli: Cli, dirs: list[Path], cwd: Path) -> list[str]:
    proc = cli.run("digest", *map(str, dirs), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    lines: list[str] = proc.stdout.splitlines()
    return lines


def test_a_sweep_from_before_digests_is_read_from_one_file_per_configuration_after_it(
    cli: Cli, tmp_path: Path
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=5, digests=False)
    plain = outputs(dirs, tmp_path / "plain")
    read, opened = collected(dirs)
    assert read > 600 and opened == set()  # every report, cost CSV and events.jsonl
    lines = digest(cli, dirs, tmp_path)
    assert len(trial_digests(dirs)) == 300
    written = [
        re.search(r"(\d+) trial digest\(s\) written, 0 current kept, 0 trial\(s\) not ended", line)
        for line in lines
    ]
    listed = [len(json.loads((d / "launch.json").read_text())["trials"]) for d in dirs]
    assert [int(m.group(1)) if m else line for m, line in zip(written, lines, strict=True)] == listed
    read, opened = collected(dirs)
    assert (read, opened) == (0, {str(p) for p in gathered(dirs)})
    assert outputs(dirs, tmp_path / "after") == plain


def test_digests_of_other_code_are_written_again(cli: Cli, tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 120, events=True, seed=6)
    for path in trial_digests(dirs):  # as an older harness wrote them
        data = orjson.loads(path.read_bytes())
        path.write_bytes(orjson.dumps({**data, "digest": "0" * 64}))
    for path in gathered(dirs):
        path.unlink()
    plain = outputs(dirs, tmp_path / "plain")
    assert collected(dirs)[0] > 200
    digest(cli, dirs, tmp_path)
    assert {orjson.loads(p.read_bytes())["digest"] for p in trial_digests(dirs)} == {parsers_digest()}
    assert collected(dirs)[0] == 0
    assert outputs(dirs, tmp_path / "after") == plain


def test_a_trial_not_ended_keeps_what_it_has_and_one_that_failed_gets_its_digest(
    cli: Cli, tmp_path: Path
) -> None:
    (out,) = make_sweep(tmp_path / "sweep", 40, events=True, seed=7, regimes=("gated",), digests=False)
    trials = sorted(p for p in (out / layout.RUNS).glob("*/*_seed*") if p.is_dir())
    running, failed, pending = trials[:3]
    for trial, state in ((running, "running"), (failed, "failed"), (pending, "pending")):
        key = layout.parse_trial_dir(trial)
        assert key is not None
        trial_id = f"gated/{key[0]}/{key[1]}/seed{key[2]}"
        write_model(trial / layout.STATUS, TrialStatus(trial_id=trial_id, state=state))
    old = layout.digest_beside(running)
    old.write_bytes(b'{"digest": "an older one"}')
    (line,) = digest(cli, [out], tmp_path)
    assert "2 trial(s) not ended" in line, line
    assert old.read_bytes() == b'{"digest": "an older one"}'  # a rerun in flight: left as it was
    assert not layout.digest_beside(pending).exists()
    assert orjson.loads(layout.digest_beside(failed).read_bytes())["digest"] == parsers_digest()
    for trial in (running, failed, pending):
        held_there = gathered_trials(trial.parent / layout.GATHERED_DIGESTS) or {}
        assert (trial.name in held_there) == (trial is failed), trial
    assert len(trial_digests([out])) == 40 - 1  # the pending one has none


def test_a_second_run_keeps_every_digest_that_stands_and_writes_what_moved(cli: Cli, tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 120, events=True, seed=8, digests=False)
    digest(cli, dirs, tmp_path)
    before = {p: os.stat(p).st_ino for p in trial_digests(dirs)}
    lines = digest(cli, dirs, tmp_path)
    assert all(re.search(r": 0 trial digest\(s\) written, \d+ current kept", line) for line in lines), lines
    assert {p: os.stat(p).st_ino for p in trial_digests(dirs)} == before  # none replaced
    # What moved since: a report graded again (a new file renamed over it), events appended, a cost CSV
    # accounted again, a file added to a trial dir.
    report = min(dirs[0].glob(f"runs/*/*{layout.REPORT_SUFFIX}"))
    copy = report.with_name(".copy")
    copy.write_bytes(report.read_bytes())
    os.replace(copy, report)
    trials = sorted(p for p in dirs[0].glob("runs/wm-*/*_seed*") if p.is_dir())
    with open(trials[0] / layout.EVENTS, "a") as events:
        events.write("\n")
    (trials[1] / "journal.json").write_text("{}")
    key = layout.parse_trial_dir(trials[2])
    assert key is not None
    cost = layout.cost_path(dirs[0], *key)
    cost.write_text(cost.read_text())
    moved = [layout.digest_beside(report.with_name(report.name.removesuffix(layout.REPORT_SUFFIX)))]
    moved += [layout.digest_beside(t) for t in trials[:3]]
    plain = without_digests(dirs, tmp_path / "plain")  # puts every digest back as a new file
    before = {p: os.stat(p).st_ino for p in trial_digests(dirs)}
    lines = digest(cli, dirs, tmp_path)
    counts = [int(m.group(1)) for line in lines if (m := re.search(r"(\d+) trial digest\(s\) written", line))]
    assert counts == [4, 0], lines
    assert {p for p in trial_digests(dirs) if os.stat(p).st_ino != before[p]} == set(moved)
    assert collected(dirs)[0] == 0 and outputs(dirs, tmp_path / "after") == plain


def test_gathering_again_leaves_a_file_that_holds_the_same_as_it_is(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 150, events=True, seed=9)
    files = gathered(dirs)
    stamps = {p: (os.stat(p).st_ino, os.stat(p.parent).st_mtime_ns) for p in files}
    assert [p for d in dirs for p in gather_digests(d)] == files
    assert {p: (os.stat(p).st_ino, os.stat(p.parent).st_mtime_ns) for p in files} == stamps
    digest = trial_digests(dirs)[0]
    digest.write_bytes(orjson.dumps({**orjson.loads(digest.read_bytes()), "cost_csv": "other.csv"}))
    for d in dirs:
        gather_digests(d)
    changed = {p for p in files if os.stat(p).st_ino != stamps[p][0]}
    assert changed == {digest.parent / layout.GATHERED_DIGESTS}
    assert (
        held(digest.parent / layout.GATHERED_DIGESTS)[digest.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX)][
            "cost_csv"
        ]
        == "other.csv"
    )


def _split(data: bytes) -> dict[str, bytes] | None:
    """The gathered file's trials as its format defines them: the lines after the header, each split at its
    first tab (None: another header)."""
    header, _, body = data.partition(b"\n")
    if header != parsers_digest().encode():
        return None
    trials = {}
    for line in body.split(b"\n"):
        name, tab, digest = line.partition(b"\t")
        if tab:
            trials[name.decode("utf-8", "replace")] = digest
    return trials


HEADER = parsers_digest().encode()
GATHERED: dict[str, bytes] = {
    "empty": b"",
    "the header alone, without its newline": HEADER,
    "the header alone": HEADER + b"\n",
    "other code's header": b"0" * len(HEADER) + b"\na\t{}\n",
    "a header with a CR": HEADER + b"\r\na\t{}\n",
    "lines": HEADER + b'\na_seed1\t{"x": 1}\nb_seed2\t{}\n',
    "a last line without its newline": HEADER + b"\na\t{}\nb\t[1]",
    "a line without a tab, empty lines": HEADER + b"\n\nno tab\n\na\t{}\n\n",
    "tabs and a CR in the JSON": HEADER + b'\na\t{"t": "\t"}\t\r\n\tnameless\n',
    "a name twice": HEADER + b"\na\t1\nb\t2\na\t3\n",
    "a name not UTF-8": HEADER + b"\n\xff\xfe_seed1\t{}\n",
}


@pytest.mark.parametrize("case", list(GATHERED))
def test_a_gathered_file_is_read_as_its_lines_split_at_their_first_tab(tmp_path: Path, case: str) -> None:
    path = tmp_path / layout.GATHERED_DIGESTS
    path.write_bytes(GATHERED[case])
    parsed = open_parsed_inputs(None)
    got = read_gathered(parsed, str(path))
    expected = _split(GATHERED[case])
    assert {name: bytes(line) for name, line in got.items()} == (expected or {})
    assert list(got) == list(expected or {})
    assert parsed.seen[str(path)] == stamp_of(str(path))
    assert read_gathered(parsed, str(tmp_path / "absent")) == {}
