"""Local competitions in MLE-bench's folder format: discovery, loading, offline preparation.

Reads `<competition>/config.yaml`, `prepare.py`, `grade.py`, `description.md` (package folders and
`--competitions-dir`); writes `<data_dir>/<id>/prepared/{public,private}/` like `mlebench prepare`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import yaml

from mle_world.errors import ConfigError, UserError, not_a_dir, not_utf8
from mle_world.storage import write_json_atomic

if TYPE_CHECKING:  # pandas costs ~0.3 s to import; only grading reads CSVs
    import pandas as pd

PACKAGE_COMPETITIONS_DIR = Path(__file__).resolve().parent / "competitions"
MARKER = ".mle_world_prepared.json"


@dataclass(frozen=True)
class LocalCompetition:
    """A competition folder's `config.yaml` with paths resolved."""

    id: str
    name: str
    competition_type: str
    directory: Path
    description: Path
    answers: Path
    """Relative to the data dir, e.g. `<id>/prepared/private/test.csv`."""
    sample_submission: Path
    grader_name: str
    grade_fn: str
    preparer: str


def _require(config: dict[str, Any], key: str, path: Path) -> Any:
    if key not in config or config[key] in (None, ""):
        raise ConfigError(f"{path}: missing key {key!r}")
    return config[key]


def load_competition(directory: Path) -> LocalCompetition:
    """Load `<directory>/config.yaml` (MLE-bench's fields); ConfigError names the file and key."""
    path = directory / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({not_utf8(exc)})") from None
    except yaml.YAMLError as exc:
        # One line, as for the harness's own configs (str(exc) spans several, with the source quoted).
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}: invalid YAML{line}: {getattr(exc, 'problem', None) or 'syntax error'}"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping")
    dataset = _require(config, "dataset", path)
    grader = _require(config, "grader", path)
    if not isinstance(dataset, dict) or not isinstance(grader, dict):
        raise ConfigError(f"{path}: `dataset` and `grader` must be mappings")
    description = Path(str(_require(config, "description", path)))
    if not description.is_absolute():
        # MLE-bench paths are repo-relative (mlebench/competitions/<id>/description.md): use the name.
        description = directory / description.name
    return LocalCompetition(
        id=str(_require(config, "id", path)),
        name=str(_require(config, "name", path)),
        competition_type=str(config.get("competition_type", "simple")),
        directory=directory,
        description=description,
        answers=Path(str(_require(dataset, "answers", path))),
        sample_submission=Path(str(_require(dataset, "sample_submission", path))),
        grader_name=str(_require(grader, "name", path)),
        grade_fn=str(_require(grader, "grade_fn", path)),
        preparer=str(_require(config, "preparer", path)),
    )


def _competition_folders(root: Path) -> Iterable[Path]:
    """`root` itself when it holds config.yaml, else its subfolders that do."""
    if (root / "config.yaml").is_file():
        yield root
        return
    for child in sorted(root.iterdir()):
        if (child / "config.yaml").is_file():
            yield child


def list_local_competitions(extra_dirs: Iterable[Path] = ()) -> dict[str, Path]:
    """Package competitions plus `--competitions-dir` folders, by id; an id clash is a UserError."""
    found: dict[str, Path] = {}
    roots = [PACKAGE_COMPETITIONS_DIR, *extra_dirs]
    for root in roots:
        if not root.is_dir():
            raise UserError(f"--competitions-dir {root}: {not_a_dir(root)}")
        folders = list(_competition_folders(root))
        if not folders and root is not PACKAGE_COMPETITIONS_DIR:
            # A wrong folder (the parent of the one meant, a typo'd copy) otherwise went unnoticed
            # until the competition it should have defined was "unknown".
            raise UserError(
                f"--competitions-dir {root}: no competition in it (a folder with config.yaml, or "
                "subfolders that have one)"
            )
        for folder in folders:
            comp = load_competition(folder)
            if comp.id in found and found[comp.id].resolve() != folder.resolve():
                raise UserError(f"competition id {comp.id!r} is defined twice: {found[comp.id]} and {folder}")
            # Absolute: the folder travels to the grading step, which on Slurm runs on a compute node
            # whose cwd need not be the launcher's (--chdir, or /tmp where that path does not exist).
            found[comp.id] = folder.absolute()
    return found


def check_no_mlebench_clash(local: Iterable[str], mlebench_ids: Iterable[str]) -> None:
    """One id space: a local id that is also an MLE-bench id is a UserError."""
    clash = sorted(set(local) & set(mlebench_ids))
    if clash:
        raise UserError(f"local competition id(s) {', '.join(clash)} clash with MLE-bench's")


def _load_module(comp: LocalCompetition, import_string: str, tag: str) -> ModuleType:
    """Load `<module>` of `module:function` from the folder: the last dotted part names the file."""
    module_part = import_string.split(":", 1)[0]
    stem = module_part[:-3] if module_part.endswith(".py") else module_part.rsplit(".", 1)[-1]
    file = comp.directory / f"{stem}.py"
    if not file.is_file():
        raise ConfigError(f"{comp.directory / 'config.yaml'}: {tag} {import_string!r}: no {file.name}")
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:10]
    name = f"_mle_world_local_{stem}_{digest}"
    cached = sys.modules.get(name)
    if cached is not None:
        return cached
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{file}: cannot import")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(comp.directory))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"{file}: import failed ({type(exc).__name__}: {exc})") from exc
    finally:
        sys.path.remove(str(comp.directory))
    sys.modules[name] = module
    return module


def _load_fn(comp: LocalCompetition, import_string: str, tag: str) -> Callable[..., Any]:
    if ":" not in import_string:
        raise ConfigError(f"{comp.directory / 'config.yaml'}: {tag} must be 'module:function'")
    fn_name = import_string.split(":", 1)[1]
    fn = getattr(_load_module(comp, import_string, tag), fn_name, None)
    if not callable(fn):
        raise ConfigError(f"{comp.directory / 'config.yaml'}: {tag} {import_string!r} is not callable")
    return fn  # type: ignore[no-any-return]


def load_grade_fn(comp: LocalCompetition) -> Callable[[pd.DataFrame, Any], Any]:
    """The folder's `grade(submission, answers) -> float`."""
    return _load_fn(comp, comp.grade_fn, "grader.grade_fn")


def read_csv_exact(path: Path) -> pd.DataFrame:
    """`read_csv` with round-trip float parsing (MLE-bench's choice; pandas >= 3 does it by default)."""
    import pandas as pd

    if int(pd.__version__.split(".", 1)[0]) >= 3:
        return pd.read_csv(path)
    return pd.read_csv(path, float_precision="round_trip")


def load_answers(path: Path) -> Any:
    """Answers as MLE-bench reads them: CSV with round-trip floats, or JSONL records."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return read_csv_exact(path)


def is_prepared(data_dir: Path, task: str) -> bool:
    """Both `prepared/public` and `prepared/private` exist and are non-empty."""
    prepared = data_dir / task / "prepared"
    return all(
        (prepared / part).is_dir() and any((prepared / part).iterdir()) for part in ("public", "private")
    )


def _fingerprint(comp: LocalCompetition) -> str:
    digest = hashlib.sha256()
    for name in ("config.yaml", "prepare.py", "description.md"):
        file = comp.directory / name
        if file.is_file():
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def prepare_local(comp_id: str, comp_dir: Path, data_dir: Path, seed: int = 0) -> Path:
    """Prepare a local competition into `<data_dir>/<id>/prepared/`; idempotent, deterministic by seed.

    Runs the folder's `fetch_raw(raw, seed)` (offline, e.g. scikit-learn's bundled data) — or,
    without one, uses a user-provided `<data_dir>/<id>/raw/` — then `prepare(raw, public, private)`,
    copies description.md into public/, and swaps the result in atomically. Returns the prepared dir.
    """
    comp = load_competition(comp_dir)
    if comp.id != comp_id:
        raise ConfigError(f"{comp_dir / 'config.yaml'}: id is {comp.id!r}, expected {comp_id!r}")
    root = data_dir / comp_id
    prepared = root / "prepared"
    marker = {"id": comp_id, "seed": seed, "fingerprint": _fingerprint(comp)}
    marker_path = prepared / MARKER
    if is_prepared(data_dir, comp_id) and marker_path.is_file():
        try:
            if json.loads(marker_path.read_text(encoding="utf-8")) == marker:
                return prepared
        except (OSError, ValueError):
            pass
    root.mkdir(parents=True, exist_ok=True)
    prepare_fn = _load_fn(comp, comp.preparer, "preparer")
    module = _load_module(comp, comp.preparer, "preparer")
    fetch_raw = getattr(module, "fetch_raw", None)
    user_raw = root / "raw"
    if not callable(fetch_raw) and not (user_raw.is_dir() and any(user_raw.iterdir())):
        raise ConfigError(
            f"{comp.directory}: prepare.py has no fetch_raw(raw, seed) and {user_raw} is empty; "
            "define fetch_raw or put the raw data there"
        )
    work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=root))
    try:
        raw, public, private = work / "raw", work / "prepared" / "public", work / "prepared" / "private"
        for folder in (public, private):
            folder.mkdir(parents=True)
        if callable(fetch_raw):
            raw.mkdir()
            fetch_raw(raw, seed)
        else:
            shutil.copytree(user_raw, raw)
        prepare_fn(raw=raw, public=public, private=private)
        shutil.copyfile(comp.description, public / "description.md")
        write_json_atomic(work / "prepared" / MARKER, marker)
        if prepared.exists():
            shutil.rmtree(prepared)
        (work / "prepared").rename(prepared)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return prepared
