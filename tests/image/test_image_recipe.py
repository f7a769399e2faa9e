"""Static checks of the shell scripts (shellcheck) and of the image recipe's pinned requirements.

Reads every *.sh under scripts/ and image/, the shell shims under tests/shims/, and image/*.txt;
writes nothing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from image_helpers import REPO, require_tool

PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")


def shell_scripts() -> list[Path]:
    """*.sh under scripts/, image/, tests/shims/, tests/image/, plus extension-less shell shims."""
    tops = ("scripts", "image", "tests/shims", "tests/image")
    found = {p for top in tops if (REPO / top).is_dir() for p in (REPO / top).rglob("*.sh")}
    for shim in (REPO / "tests" / "shims").iterdir():
        if shim.is_file() and shim.suffix == "":
            first = shim.read_text(errors="replace").split("\n", 1)[0]
            if first.startswith("#!") and ("bash" in first or first.endswith("/sh")):
                found.add(shim)
    return sorted(found)


def test_the_scripts_exist() -> None:
    names = {p.relative_to(REPO).as_posix() for p in shell_scripts()}
    for expected in (
        "scripts/image/build_aide_enroot.sh",
        "image/setup.sh",
        "scripts/serve/serve_vllm.sh",
        "scripts/serve/serve_coder.sh",
        "scripts/serve/serve_world.sh",
        "scripts/serve/serve_feedback.sh",
        "scripts/install_runtimes.sh",
        "scripts/image/build_ci_image.sh",
        "image/ci/setup.sh",
    ):
        assert expected in names


def test_shellcheck_clean() -> None:
    shellcheck = require_tool("shellcheck")
    scripts = shell_scripts()
    result = subprocess.run(
        [shellcheck, "--external-sources", *map(str, scripts)], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr


# A reader that may leave before its writer is done: `grep -q`/`-m N`/`-l`, `head`, `sed ...q`,
# `awk ... exit`. Under `set -o pipefail` the writer's SIGPIPE (141) becomes the pipeline's status:
# `dpkg -L libbsd-dev | grep -m1 ...` failed the runtime build in about 1 run in 8 on a fresh machine.
EARLY_EXIT_READER = re.compile(
    r"(?<![|])[|](?![|])\s*(?:"
    r"grep\b[^|;]*\s-(?:[a-zA-Z]*[qlL]|[a-zA-Z]*m\s*\d*)\b"
    r"|grep\b[^|;]*--(?:quiet|silent|max-count|files-with)"
    r"|head\b|sed\b[^|]*\bq\b|awk\b[^|]*\bexit\b)"
)


def early_exit_pipes(text: str) -> list[str]:
    """The lines of a shell text that pipe into an early-exit reader (comments and line joins read as bash does)."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        code = re.sub(r"(^|\s)#.*", "", line)
        if EARLY_EXIT_READER.search(code):
            found.append(line.strip())
    return found


def test_the_early_exit_check_finds_the_pattern() -> None:
    assert early_exit_pipes('libbsd="$(dpkg -L libbsd-dev | grep -m1 x)"')
    assert early_exit_pipes("sinfo -h | head -n1")
    assert early_exit_pipes("a | grep -q b || c")
    assert early_exit_pipes("a \\\n  | grep --quiet b")
    assert early_exit_pipes("a | awk '/x/ { print; exit }'")
    assert not early_exit_pipes("a || grep -q b file")
    assert not early_exit_pipes("grep -q b file | sort")
    assert not early_exit_pipes("a | grep -v b | sort  # not | head")
    assert not early_exit_pipes("a | tail -n 1")


def test_no_pipeline_ends_in_an_early_exit_reader() -> None:
    """Every shell script and rendered command template: none pipes into a reader that can leave early."""
    templates = sorted((REPO / "src" / "mle_world").rglob("*.sh.j2"))
    assert templates, "no command templates found"
    offenders = [
        f"{path.relative_to(REPO)}: {line}"
        for path in [*shell_scripts(), *templates]
        for line in early_exit_pipes(path.read_text(errors="replace"))
    ]
    assert not offenders, "read the whole output, then pick from it:\n" + "\n".join(offenders)


OWN_SCRIPTS = (
    "scripts/image/build_aide_enroot.sh",
    "image/setup.sh",
    "scripts/serve/serve_vllm.sh",
    "scripts/serve/serve_coder.sh",
    "scripts/serve/serve_world.sh",
    "scripts/serve/serve_feedback.sh",
    "scripts/serve/serve_config.py",
    "scripts/install_runtimes.sh",
    "scripts/image/build_ci_image.sh",
    "image/ci/setup.sh",
    "tests/shims/vllm",
)


def test_scripts_are_executable() -> None:
    for name in OWN_SCRIPTS:
        assert (REPO / name).stat().st_mode & 0o111, f"{name} is not executable"


def _requirements(name: str) -> list[str]:
    lines = (REPO / "image" / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_requirements_are_pinned_and_unique() -> None:
    torch = _requirements("requirements-torch.txt")
    rest = _requirements("requirements.txt")
    for line in torch + rest:
        assert PIN.match(line), f"not an exact pin: {line!r}"
    names = [line.split("==")[0].lower().replace("_", "-") for line in torch + rest]
    assert len(names) == len(set(names)), "a package is pinned twice"
    assert {"torch", "torchvision", "torchaudio"} <= set(names[: len(torch)])
    for needed in (
        "numpy",
        "pandas",
        "scikit-learn",
        "xgboost",
        "lightgbm",
        "transformers",
        "kaggle",
        "openai",
    ):
        assert needed in names
    assert "kaggle==1.6.17" in rest  # MLE-bench needs kaggle.rest (gone in 1.7+)


def test_setup_recipe_installs_the_stack() -> None:
    text = (REPO / "image" / "setup.sh").read_text()
    for needle in (
        "python3.11",
        "requirements-torch.txt",
        "requirements.txt",
        "torch.version.cuda",
        "git lfs pull",
        'checkout --quiet --detach "$MLEBENCH_COMMIT"',
        'pip install -c "$REQUIREMENTS" -c "$TORCH_REQUIREMENTS" "$SRC"',
        'pip freeze --all >"$INFO/pip-freeze.txt"',
        "/etc/environment",
    ):
        assert needle in text
    syntax = subprocess.run(["bash", "-n", str(REPO / "image" / "setup.sh")], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
