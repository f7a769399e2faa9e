"""The audit's one-read path for input files (`cache.read_stamped`, `cache.text_of`, the parsers of bytes)
gives what reading each file with `open()` gave, and hands anything odd to that usual read: directories,
FIFOs, dangling symlinks, vanished files, text that is not UTF-8, files that grow while read.

Reads /proc/self/status (a regular file whose size says 0); writes files under tmp_path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from synthetic import make_sweep

from mle_world.audit.cache import ParsedInputs, open_parsed_inputs, read_stamped, stamp_of, text_of
from mle_world.audit.collect import load_sweep, trial_predictions

CHUNK = 8192
"""TextIOWrapper's read size: text split around it must decode as one piece does."""
TEXTS: dict[str, bytes] = {
    "empty": b"",
    "plain": b'{"a": 1}\n{"b": 2}\n',
    "crlf": b'{"a": 1}\r\n{"b": 2}\r\n',
    "lone-cr": b'{"a": 1}\r{"b": 2}\r\r\n\n',
    "cr-at-chunk-end": b"x" * (CHUNK - 1) + b"\r\n" + b"y\r",
    "multibyte-across-chunks": ("\u00e9\u4e2d\U0001f600\u2028" * 3000).encode(),
    "bom": b"\xef\xbb\xbf{}",
    "bad-utf8": b"ok\n" + b"\xff\xfe" + b"x" * CHUNK + b"\xe4\xb8",
    "truncated-multibyte": "\u4e2d".encode()[:2],
    "bad-utf8-after-a-chunk": b"a" * (CHUNK + 10) + b"\xc3(",
}


@pytest.mark.parametrize("errors", ["strict", "replace"])
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_text_of_gives_what_a_text_mode_read_gives(tmp_path: Path, name: str, errors: str) -> None:
    path = tmp_path / name
    path.write_bytes(TEXTS[name])
    try:
        with open(path, encoding="utf-8", errors=errors) as handle:
            expected: str | type[Exception] = handle.read()
    except UnicodeDecodeError:
        expected = UnicodeDecodeError
    try:
        got: str | type[Exception] = text_of(TEXTS[name], errors)
    except UnicodeDecodeError:
        got = UnicodeDecodeError
    assert got == expected


def test_read_stamped_reads_regular_files_with_the_stamp_stat_gives(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 * 65536 + 7))
    link = tmp_path / "link"
    link.symlink_to(big)
    for path in (big, link):
        got = read_stamped(str(path))
        assert got is not None and got == (big.read_bytes(), stamp_of(str(path)))
    empty = tmp_path / "empty"
    empty.touch()
    assert read_stamped(str(empty)) == (b"", stamp_of(str(empty)))


def test_read_stamped_reads_past_a_size_that_is_too_small() -> None:
    # procfs files are regular with size 0: the read goes on to the end as a growing file's does
    got = read_stamped("/proc/self/status")
    assert got is not None and b"Name:" in got[0] and got[1][0] == 0


def test_read_stamped_declines_what_is_not_a_regular_file(tmp_path: Path) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading in the usual way would wait for one
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for path in (directory, fifo, dangling, tmp_path / "missing", tmp_path / "missing" / "below"):
        assert read_stamped(str(path)) is None
    if os.geteuid() != 0:  # root reads it anyway
        locked = tmp_path / "locked"
        locked.write_text("x")
        locked.chmod(0)
        assert read_stamped(str(locked)) is None


def test_parsed_inputs_fall_back_to_the_usual_read(tmp_path: Path) -> None:
    calls: list[str] = []

    def parse(path: str) -> str:
        calls.append(path)
        try:
            return Path(path).read_text()
        except OSError as exc:
            return type(exc).__name__

    def from_bytes(data: bytes) -> str | None:
        return None if data.startswith(b"odd") else data.decode()

    parsed = ParsedInputs(tmp_path / "kept.json", "digest")
    good, odd, directory = tmp_path / "good", tmp_path / "odd", tmp_path / "dir"
    good.write_text("fine")
    odd.write_text("odd one")
    directory.mkdir()
    got = [
        parsed.get("x", str(p), parse, str, str, from_bytes)
        for p in (good, odd, directory, tmp_path / "vanished")
    ]
    assert got == ["fine", "odd one", "IsADirectoryError", "FileNotFoundError"]
    assert calls == [str(odd), str(directory), str(tmp_path / "vanished")]  # not the good file
    kept = parsed.used["x"]
    assert sorted(kept) == sorted(map(str, (good, odd, directory)))  # the vanished one has no stamp
    assert all(kept[str(p)][0] == stamp_of(str(p)) for p in (good, odd, directory))
    assert parsed.read == 3


def describe(dirs: list[Path], parsed: ParsedInputs | None) -> list[str]:
    """Every field of every trial load_sweep finds (and the sweep's own lists), as text."""
    sweep = load_sweep(dirs, parsed)
    out = [repr((sweep.duplicates, sweep.unexpected, sweep.problems))]
    for trial in sweep.trials:
        fields = {f.name: getattr(trial, f.name) for f in dataclasses.fields(trial)}
        fields["files"] = sorted(trial.files) if trial.files is not None else None
        predictions = trial_predictions(trial)
        fields["predictions_cache"] = (predictions.predictions, predictions.bad_lines)
        out.append(repr(fields))
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="symlinks and FIFOs as on the cluster")
def test_hostile_files_read_the_same_on_the_one_read_path(tmp_path: Path) -> None:
    """load_sweep without kept inputs reads reports with open() (the usual read); with them, through
    read_stamped. Both find the same, for every kind of odd file."""
    dirs = make_sweep(tmp_path / "sweep", 119, events=True, seed=2)
    runs = dirs[0] / "runs" / "wm-point"
    reports = sorted(runs.glob("*_grading_report.json"))
    events = sorted(runs.glob("*/events.jsonl"))
    costs = sorted((dirs[0] / "costs").glob("wm-point.*.csv"))
    report = json.loads(reports[0].read_text())

    def write_report(path: Path, data: bytes) -> None:
        path.write_bytes(
            data.replace(b"TRIAL", json.dumps(json.loads(path.read_text())["trial_id"]).encode())
        )

    text = json.dumps({**report, "trial_id": "TRIAL"}).replace('"TRIAL"', "TRIAL").encode()
    write_report(reports[0], text.replace(b'"score"', b'"sc\xffore"'))  # not UTF-8
    write_report(reports[1], text.replace(b", ", b",\r\n"))  # CRLF
    write_report(reports[2], text.replace(b'"s.csv"', b'"s\r.csv"'))  # a CR inside a string
    write_report(reports[3], text[:50])  # truncated
    reports[4].unlink()
    reports[4].mkdir()
    reports[5].unlink()
    reports[5].symlink_to(reports[6])  # another trial's report
    reports[7].unlink()
    reports[7].symlink_to(runs / "nowhere")
    write_report(reports[8], b"\xef\xbb\xbf" + text)  # a byte order mark
    write_report(reports[9], text + b" " * 100_000)
    lines = events[0].read_bytes()
    events[0].write_bytes(lines.replace(b"improve", b"impr\xffove", 1))
    events[1].write_bytes(lines.replace(b"\n", b"\r\n"))
    events[2].write_bytes(lines.replace(b"\n", b"\r"))
    events[3].write_bytes(lines[:-30])
    events[4].unlink()
    events[4].mkdir()
    events[5].write_bytes(lines.replace(b'"n"', '"\u00e9\u2028"'.encode()) * 300)
    events[6].unlink()
    events[6].symlink_to(events[7])
    rows = costs[0].read_bytes()
    costs[0].write_bytes(rows.replace(b"coder", b"cod\xffer"))
    costs[1].write_bytes(rows.replace(b"\n", b"\r\n"))
    costs[2].unlink()
    costs[2].mkdir()
    costs[3].write_bytes(b"\n" + rows)
    costs[4].write_bytes(rows.replace(b",0.25,", b",nan,", 1))

    usual = describe(dirs, None)
    first = describe(dirs, open_parsed_inputs(tmp_path / "audit"))
    assert first == usual
    problems = "\n".join(usual)
    for problem in ("unreadable (UnicodeDecodeError)", "unreadable (IsADirectoryError)", "corrupt JSON"):
        assert problem in problems
