"""The record readers: `storage.read_record` (strict: one line naming the file) and `storage.load_record`
(tolerant: the record or why there is none), over every kind of file a record's place can hold.

Writes real files, a FIFO and a directory under tmp_path; reads them back through both readers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from mle_world.errors import UserError
from mle_world.records import TrialStatus
from mle_world.storage import Unreadable, load_record, read_record, read_text, write_model

GOOD = TrialStatus(trial_id="gated/aide/iris-species/seed1", state="running", attempt=2)


def _good(path: Path) -> None:
    write_model(path, GOOD)


# Each odd file, and the exception, reason and strict line the readers give for it.
CASES: dict[str, tuple[Callable[[Path], object], type[Exception], str, str]] = {
    "fifo": (os.mkfifo, OSError, "not a regular file", "cannot read the trial status (not a regular file)"),
    "directory": (
        Path.mkdir,
        IsADirectoryError,
        "Is a directory",
        "cannot read the trial status (Is a directory)",
    ),
    "not utf-8": (
        lambda p: p.write_bytes(b'{"trial_id": "\xff"}'),
        UnicodeDecodeError,
        "not UTF-8 text: byte 0xff at offset 14",
        "not a valid trial status (not UTF-8 text: byte 0xff at offset 14)",
    ),
    "invalid json": (
        lambda p: p.write_text('{"trial_id": '),
        ValidationError,
        "Invalid JSON: EOF while parsing a value at line 1 column 13",
        "not a valid trial status (Invalid JSON: EOF while parsing a value at line 1 column 13)",
    ),
    "schema": (
        lambda p: p.write_text('{"trial_id": "t", "state": "sleeping"}'),
        ValidationError,
        "Input should be 'pending', 'submitted', 'running', 'succeeded' or 'failed'",
        "not a valid trial status (Input should be 'pending', 'submitted', 'running', 'succeeded' or 'failed')",
    ),
    "missing": (
        lambda p: None,
        FileNotFoundError,
        "No such file or directory",
        "cannot read the trial status",
    ),
}


def test_a_regular_file_reads_as_its_record(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    _good(path)
    assert load_record(path, TrialStatus) == GOOD
    assert read_record(path, TrialStatus, "trial status") == GOOD
    assert read_record(str(path), TrialStatus, "trial status", default=TrialStatus(trial_id="x")) == GOOD


@pytest.mark.parametrize("case", list(CASES))
def test_the_tolerant_reader_says_why_a_file_is_no_record(tmp_path: Path, case: str) -> None:
    make, error, reason, _ = CASES[case]
    path = tmp_path / "status.json"
    make(path)
    got = load_record(path, TrialStatus)  # a FIFO is refused at once: this never waits for a writer
    assert isinstance(got, Unreadable) and got.path == str(path)
    assert isinstance(got.error, error), got.error
    assert got.reason == reason
    assert got.missing is (case == "missing")


@pytest.mark.parametrize("case", list(CASES))
def test_the_strict_reader_raises_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    make, _, _, line = CASES[case]
    path = tmp_path / "status.json"
    make(path)
    with pytest.raises(UserError) as raised:
        read_record(path, TrialStatus, "trial status")
    message = str(raised.value)
    assert message.startswith(f"{path}: {line}") and "\n" not in message, message


def test_a_missing_record_is_the_default_when_one_is_given(tmp_path: Path) -> None:
    pending = TrialStatus(trial_id="t")
    assert read_record(tmp_path / "status.json", TrialStatus, "trial status", default=pending) is pending
    (tmp_path / "status.json").write_text("{")  # a default stands in for a missing file only
    with pytest.raises(UserError, match="not a valid trial status"):
        read_record(tmp_path / "status.json", TrialStatus, "trial status", default=pending)


def test_detail_leads_a_schema_error_with_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text('{"trial_id": "t", "attempt": "many"}')
    got = load_record(path, TrialStatus)
    assert isinstance(got, Unreadable)
    assert got.detail == "attempt: Input should be a valid integer, unable to parse string as an integer"
    os.mkfifo(tmp_path / "fifo")
    fifo = load_record(tmp_path / "fifo", TrialStatus)
    assert isinstance(fifo, Unreadable) and fifo.detail == "not a regular file"


def test_read_text_reads_as_a_text_mode_open_and_refuses_a_fifo(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"a\r\nb\rc\xff\n")
    with open(path, encoding="utf-8", errors="replace") as handle:
        assert read_text(path, errors="replace") == handle.read()
    with pytest.raises(UnicodeDecodeError):
        read_text(path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        read_text(tmp_path / "fifo")
