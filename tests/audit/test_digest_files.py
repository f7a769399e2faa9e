"""The digests gathered per configuration when a launch ends (`audit/digest_files.py`): a first audit reads
one file per configuration, neither a trial's digest nor its files, and says what an audit without any
digest says; a gathered file that grew stale, of other code or garbage serves nothing wrong.

Reads nothing; writes small synthetic sweeps (tests/support/synthetic.py: digests gathered as a launch
gathers them) and their audit dirs under tmp_path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import run_audit
from mle_world.audit.cache import open_parsed_inputs
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import write_trial_digest
from mle_world.audit.digest_files import gather_digests

OUTPUTS = ("summary.csv", "report.md")


def outputs(dirs: list[Path], out: Path) -> dict[str, str]:
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False) == 0
    return {name: (out / name).read_text() for name in OUTPUTS}


def gathered(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob(f"runs/*/{layout.GATHERED_DIGESTS}"))


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
    per_file = {p: set(orjson.loads(p.read_bytes())["trials"]) for p in files}
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
    data = orjson.loads(path.read_bytes())
    del data["trials"][later.name]
    path.write_bytes(orjson.dumps(data))
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
    other = orjson.loads(files[0].read_bytes())
    other["digest"] = "0" * 64
    files[0].write_bytes(orjson.dumps(other))
    files[1].write_text("{not json")
    files[2].write_text('{"digest": null, "trials": []}')
    broken = orjson.loads(files[3].read_bytes())
    for digest in broken["trials"].values():
        digest["report"] = ["not a stamp", 42]
        digest["dir"] = 7
    broken["trials"]["../../escape"] = {"report": [[1, 2, 3, 4], "{}"]}
    files[3].write_bytes(orjson.dumps(broken))
    read, opened = collected(dirs)
    # The first three configurations' trials fall back to their own digests; the broken one's trials read
    # their reports and list their dirs (their events and costs still served).
    assert {p for p in opened if p.endswith(layout.AUDIT_DIGEST_SUFFIX)} == {
        str(p) for p in trial_digests(dirs) if p.parent in {f.parent for f in files[:3]}
    }
    trials_of_broken = orjson.loads(files[3].read_bytes())["trials"]
    with_dir = [n for n in trials_of_broken if (files[3].parent / n).is_dir()]
    assert read == len(trials_of_broken) - 1 + len(with_dir)
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
    written = gather_digests(out)
    assert written == [c / layout.GATHERED_DIGESTS for c in configurations]
    data = orjson.loads((cfg / layout.GATHERED_DIGESTS).read_bytes())
    names = {d.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX) for d in digests[2:]}
    assert set(data["trials"]) == names
    assert all("digest" not in digest for digest in data["trials"].values())
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
