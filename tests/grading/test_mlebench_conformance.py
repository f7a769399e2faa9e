"""The built-in grader and medal rules against MLE-bench's own code, when a real MLE-bench is installed.

Needs `MLEBENCH_VENV` (a venv where `import mlebench` works, as scripts/install_mlebench.sh makes it;
scripts/test.sh installs one from ../shared/vendor on every run). Without it the tests fail under CI=true
and are skipped elsewhere. MLE-bench's `grade_csv` grades the same files, of the same competition folders
(with their own leaderboards: the archive's are Git LFS pointers), as `BuiltinGrader`; its
`Grader.rank_score` ranks the same scores on the same leaderboards as `medals.rank_score`; a registry
competition graded by `VenvMLEBenchGrader` on a leaderboard the test supplies (the audit against its
aggregator: test_mlebench_aggregate.py). Writes only pytest's tmp paths.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from gradekit import write_custom_competition, write_leaderboard
from mlebenchkit import find_mlebench_python, installed_source, require_mlebench

from mle_world.errors import UserError
from mle_world.grading.builtin import BuiltinGrader
from mle_world.grading.medals import is_lower_better, rank_score
from mle_world.grading.mlebench import VenvMLEBenchGrader
from mle_world.grading.mlebench_version import describe
from mle_world.tasks.local import prepare_local

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
ARCHIVE = REPO.parent / "shared" / "vendor" / "mle-bench-783b15a.tar.gz"


MLEBENCH_PYTHON, WHY_NOT = find_mlebench_python()


@pytest.fixture(autouse=True)
def _real_mlebench() -> None:
    require_mlebench(MLEBENCH_PYTHON, WHY_NOT)


# Runs in MLE-bench's venv: a Competition built from one of our folders, graded by grade_csv.
GRADE_WITH_MLEBENCH = """
import importlib.util, json, os, sys, tempfile
from pathlib import Path
os.chdir(tempfile.mkdtemp())
from mlebench.grade import grade_csv
from mlebench.grade_helpers import Grader
from mlebench.registry import Competition
folder, data, cid = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
spec = importlib.util.spec_from_file_location("folder_grade", folder / "grade.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["folder_grade"] = module
private, public = data / cid / "prepared" / "private", data / cid / "prepared" / "public"
comp = Competition(
    id=cid, name=cid, description="d", grader=Grader("g", "folder_grade:grade"), answers=private / "test.csv",
    gold_submission=private / "test.csv", sample_submission=public / "sample_submission.csv",
    competition_type="simple", prepare_fn=lambda *a: None, raw_dir=data / cid / "raw", private_dir=private,
    public_dir=public, checksums=folder / "checksums.yaml", leaderboard=folder / "leaderboard.csv",
)
out = {}
for sub in sys.argv[4:]:
    try:
        out[sub] = grade_csv(Path(sub), comp).to_dict()
    except Exception as exc:
        out[sub] = {"crash": type(exc).__name__}
print(json.dumps(out))
"""

RANK_WITH_MLEBENCH = """
import json, os, sys, tempfile
os.chdir(tempfile.mkdtemp())
import pandas as pd
from mlebench.grade_helpers import Grader
grader = Grader.__new__(Grader)  # rank_score and is_lower_better use no grade_fn
out = []
for scores, score in json.load(sys.stdin):
    board = pd.DataFrame({"score": scores})
    out.append([grader.rank_score(score, board), grader.is_lower_better(board)])
print(json.dumps(out))
"""


def mlebench(script: str, *args: str, stdin: str = "") -> object:
    assert MLEBENCH_PYTHON is not None
    env = {**os.environ, "PYTHONPATH": str(SRC)}  # our folders' grade.py import mle_world.grading
    done = subprocess.run(
        [str(MLEBENCH_PYTHON), "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def odd_submissions(answers: Path, out: Path, target: str) -> list[Path]:
    """The correct answers and subtly wrong variants of them."""
    out.mkdir(parents=True)
    truth = pd.read_csv(answers)[["id", target]]
    frames = {
        "correct": truth,
        "reordered_columns": truth[[target, "id"]],
        "shuffled_rows": truth.sample(frac=1, random_state=0),
        "missing_row": truth.iloc[1:],
        "extra_row": pd.concat([truth, truth.iloc[[0]].assign(id=10**6)]),
        "duplicate_id": pd.concat([truth.iloc[1:], truth.iloc[[1]]]),
        "extra_column": truth.assign(extra=1),
        "float_ids": truth.assign(id=truth["id"].astype(float)),
        "half_wrong": truth.assign(**{target: truth[target].iloc[::-1].to_numpy()}),
    }
    for name, cell in (("nan", None), ("inf", "inf"), ("text", "abc")):
        frame = truth.copy()
        frame[target] = frame[target].astype(object)
        frame.iloc[0, 1] = cell
        frames[f"{name}_prediction"] = frame
    for name, frame in frames.items():
        frame.to_csv(out / f"{name}.csv", index=False)
    body = (out / "correct.csv").read_bytes()
    raw = {
        "header_only": f"id,{target}\n".encode(),
        "empty": b"",
        "bom": b"\xef\xbb\xbf" + body,
        "crlf": body.replace(b"\n", b"\r\n"),
        "gzip": gzip.compress(body),
        "binary": bytes(range(256)) * 4,
        "ragged": body + b"1,2,3,4\n",
    }
    for name, data in raw.items():
        (out / f"{name}.csv").write_bytes(data)
    (out / "a_directory.csv").mkdir()
    (out / "not_csv.txt").write_bytes(body)
    return sorted(out.iterdir()) + [out / "absent.csv"]


FIELDS_COMPARED = ("created_at", "submission_path")


@pytest.mark.parametrize(
    ("comp", "target"),
    [
        ("iris-species", "species"),
        ("diabetes-progression", "progression"),
        ("breast-cancer-diagnosis", "malignant"),
    ],
)
def test_builtin_grader_reports_what_mlebench_grade_csv_reports(
    tmp_path: Path, local_comps: dict[str, Path], comp: str, target: str
) -> None:
    data = tmp_path / "data"
    prepare_local(comp, local_comps[comp], data, seed=0)
    subs = odd_submissions(data / comp / "prepared" / "private" / "test.csv", tmp_path / "subs", target)
    theirs = mlebench(GRADE_WITH_MLEBENCH, str(local_comps[comp]), str(data), comp, *map(str, subs))
    assert isinstance(theirs, dict)
    grader = BuiltinGrader(local_comps, data)
    for path in subs:
        ours = grader.grade(comp, path).model_dump(
            mode="json", exclude={"invalid_reason", "mlebench_version", *FIELDS_COMPARED}
        )
        their = theirs[str(path)]
        if "crash" in their:  # MLE-bench raises on a file pandas cannot parse: here it is invalid, no medal
            assert their["crash"] in ("ParserError", "UnicodeDecodeError"), (path.name, their)
            assert not ours["valid_submission"] and not ours["any_medal"] and ours["submission_exists"]
            continue
        assert ours == {k: v for k, v in their.items() if k not in FIELDS_COMPARED}, path.name


def test_medal_rules_rank_as_mlebench_ranks(tmp_path: Path) -> None:
    """Every leaderboard size bracket, both directions, ties at the thresholds, all-equal boards."""
    rng = random.Random(0)
    cases: list[tuple[list[float], float | None]] = []
    for n in (1, 2, 9, 10, 11, 99, 100, 101, 249, 250, 251, 999, 1000, 1001, 2500):
        for lower in (False, True):
            scores = sorted((round(rng.uniform(0, 1), 2) for _ in range(n)), reverse=not lower)
            if rng.random() < 0.2:
                scores = [0.5] * n
            picks = [None, *rng.sample(scores, min(6, n)), rng.uniform(-0.1, 1.1), rng.uniform(-0.1, 1.1)]
            cases += [(scores, pick) for pick in picks]
    theirs = mlebench(RANK_WITH_MLEBENCH, stdin=json.dumps(cases))
    assert isinstance(theirs, list) and len(theirs) == len(cases)
    for (scores, score), (rank, lower) in zip(cases, theirs, strict=True):
        th, ours = rank_score(score, scores)
        assert is_lower_better(scores) == lower
        assert (th.gold, th.silver, th.bronze, th.median) == (
            rank["gold_threshold"],
            rank["silver_threshold"],
            rank["bronze_threshold"],
            rank["median_threshold"],
        )
        assert ours._asdict() == {
            k: rank[k] for k in ("gold_medal", "silver_medal", "bronze_medal", "above_median")
        }


def test_a_score_on_a_threshold_gets_that_medal_in_both(tmp_path: Path) -> None:
    """Ties: a submission scoring exactly the gold/silver/bronze row's score, through both graders."""
    scores = [
        float(100 - r) for r in range(120)
    ]  # 120 teams: gold row 10 (91), silver 24 (77), bronze 48 (53)
    folder = write_custom_competition(tmp_path / "comps", "value-comp", scores)
    data = tmp_path / "data"
    prepare_local("value-comp", folder, data)
    subs = []
    for value in (91.0, 90.5, 77.0, 76.5, 53.0, 52.5, 40.0, 200.0):
        subs.append(tmp_path / f"{value}.csv")
        subs[-1].write_text(f"id,value\n1,{value}\n")
    theirs = mlebench(GRADE_WITH_MLEBENCH, str(folder), str(data), "value-comp", *map(str, subs))
    assert isinstance(theirs, dict)
    grader = BuiltinGrader({"value-comp": folder}, data)
    medals = []
    for path in subs:
        ours = grader.grade("value-comp", path).model_dump(
            mode="json", exclude={"invalid_reason", "mlebench_version", *FIELDS_COMPARED}
        )
        assert ours == {k: v for k, v in theirs[str(path)].items() if k not in FIELDS_COMPARED}, path.name
        medals.append(next((m for m in ("gold", "silver", "bronze") if ours[f"{m}_medal"]), "-"))
    assert medals == ["gold", "silver", "silver", "bronze", "bronze", "-", "-", "gold"]


def test_the_mlebench_that_grades_is_recorded_as_version_and_commit() -> None:
    """What VenvMLEBenchGrader records with each report, from this MLE-bench: its package version and the
    commit it is installed from (scripts/install_mlebench.sh: pip install -e of a clone, or of the vendored
    `git archive`, whose header holds the commit)."""
    source = installed_source(MLEBENCH_PYTHON)
    assert source["file"] is not None
    checkout = Path(source["file"]).parent.parent
    version = describe(source)
    if (checkout / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        assert version.startswith(f"{source['version']} (git {head.stdout.strip()}") and version.endswith(")")
        return
    with ARCHIVE.open("rb") as packed:
        commit = subprocess.run(
            ["git", "get-tar-commit-id"],
            input=gzip.decompress(packed.read()),
            capture_output=True,
            check=True,
        ).stdout.decode()
    assert version == f"{source['version']} (git {commit.strip()} from a git archive)"


def test_a_registry_competition_grades_through_the_venv_on_a_supplied_leaderboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production path for MLE-bench's own competitions (VenvMLEBenchGrader, its registry and
    spaceship-titanic's grade.py): refused in one line while the leaderboard is a Git LFS pointer (as in
    the vendored archive), graded with MLE-bench's thresholds once the test supplies one."""
    installed = Path(str(installed_source(MLEBENCH_PYTHON)["file"])).parent
    copy = tmp_path / "mle-bench"  # a copy first on PYTHONPATH: the installed tree stays as it is
    shutil.copytree(installed, copy / "mlebench")
    monkeypatch.setenv("PYTHONPATH", str(copy))
    assert installed_source(MLEBENCH_PYTHON, dict(os.environ))["file"] == str(
        copy / "mlebench" / "__init__.py"
    )
    board = copy / "mlebench" / "competitions" / "spaceship-titanic" / "leaderboard.csv"
    board.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:e071aca0\nsize 125841\n")
    data = tmp_path / "data"
    private = data / "spaceship-titanic" / "prepared" / "private"
    private.mkdir(parents=True)
    ids = [f"{i:04d}_01" for i in range(200)]
    truth = [i % 3 == 0 for i in range(200)]
    pd.DataFrame({"PassengerId": ids, "Transported": truth}).to_csv(private / "test.csv", index=False)
    guess = [t if i % 4 else not t for i, t in enumerate(truth)]  # every 4th wrong: accuracy 0.75
    submission = tmp_path / "submission.csv"
    pd.DataFrame({"PassengerId": ids, "Transported": guess}).to_csv(submission, index=False)
    assert MLEBENCH_PYTHON is not None
    grader = VenvMLEBenchGrader(data, MLEBENCH_PYTHON.parent.parent)
    with pytest.raises(UserError) as refused:
        grader.grade("spaceship-titanic", submission)
    assert str(refused.value) == (
        f"{board}: a Git LFS pointer, not a leaderboard: run `git lfs pull` in the MLE-bench checkout, "
        "or put the real leaderboard.csv there"
    )
    scores = [round(0.81 - i * 0.002, 4) for i in range(300)]
    write_leaderboard(board, scores)
    report = grader.grade("spaceship-titanic", submission)
    th, rank = rank_score(0.75, scores)
    assert report.score == 0.75 and report.valid_submission and report.invalid_reason is None
    assert (report.gold_threshold, report.silver_threshold, report.bronze_threshold) == th[:3]
    assert report.median_threshold == th.median and report.silver_medal  # 300 teams: silver is the top 20 %
    flags = (report.gold_medal, report.silver_medal, report.bronze_medal, report.above_median)
    assert flags == (rank.gold_medal, rank.silver_medal, rank.bronze_medal, rank.above_median)
