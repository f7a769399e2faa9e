#!/usr/bin/env bash
# Install MLE-bench (not on PyPI) from its git repository at a pinned commit, with its LFS data
# (leaderboards), into the current Python environment or into a separate venv.
#
# Usage:
#   bash scripts/install_mlebench.sh                  # pip install -e into the current env
#   MLEBENCH_VENV=~/.venvs/mlebench bash scripts/install_mlebench.sh
#                                                     # separate venv (keeps its kaggle<1.7 pin
#                                                     # away from the harness); run_paper.py finds
#                                                     # $MLEBENCH_VENV/bin/mlebench for `prepare`
# Environment:
#   MLEBENCH_DIR     checkout location (default: ${XDG_DATA_HOME:-$HOME/.local/share}/mle-bench)
#   MLEBENCH_COMMIT  commit to check out (default: the pinned one below)
#   MLEBENCH_REPO    clone URL (default: https://github.com/openai/mle-bench.git)
#   PYTHON           interpreter for the current-env install / for creating the venv (default: python3)
#
# Needs network access to GitHub (and PyPI for dependencies). Not run in CI.
set -euo pipefail
# --help prints the header above; the script takes no arguments (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    ?*) echo "install_mlebench.sh: unknown argument $1 (it takes none: set its environment variables, see --help)" >&2; exit 2 ;;
esac

# openai/mle-bench commit 783b15a (2026-02-26), the snapshot reference/mlebench.md describes.
# Pinned by its short sha; git resolves it after the full clone below.
MLEBENCH_COMMIT="${MLEBENCH_COMMIT:-783b15a}"
MLEBENCH_REPO="${MLEBENCH_REPO:-https://github.com/openai/mle-bench.git}"
MLEBENCH_DIR="${MLEBENCH_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/mle-bench}"
PYTHON="${PYTHON:-python3}"

die() { printf 'install_mlebench: %s\n' "$*" >&2; exit 1; }

command -v git >/dev/null 2>&1 || die "git is missing; install it (e.g. apt-get install git)"
git lfs version >/dev/null 2>&1 ||
  die "git-lfs is missing; install it (e.g. apt-get install git-lfs) — leaderboards are LFS files"
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON is missing; set PYTHON=/path/to/python3.11+"

if [[ -d "$MLEBENCH_DIR/.git" ]]; then
  git -C "$MLEBENCH_DIR" fetch --quiet origin || die "cannot fetch $MLEBENCH_REPO (no network to GitHub?)"
else
  mkdir -p "$(dirname "$MLEBENCH_DIR")"
  GIT_LFS_SKIP_SMUDGE=1 git clone --quiet "$MLEBENCH_REPO" "$MLEBENCH_DIR" ||
    die "cannot clone $MLEBENCH_REPO (no network to GitHub?)"
fi
git -C "$MLEBENCH_DIR" -c advice.detachedHead=false checkout --quiet "$MLEBENCH_COMMIT" ||
  die "commit $MLEBENCH_COMMIT not found in $MLEBENCH_REPO"
git -C "$MLEBENCH_DIR" lfs install --local >/dev/null
git -C "$MLEBENCH_DIR" lfs pull || die "git lfs pull failed (no network, or LFS quota exceeded)"

# A leaderboard that is still an LFS pointer makes every grade fail; check one.
sample="$MLEBENCH_DIR/mlebench/competitions/spaceship-titanic/leaderboard.csv"
if [[ -f "$sample" && "$(head -c 100 "$sample")" == 'version https://git-lfs'* ]]; then
  die "leaderboards are still git-lfs pointers; run 'git lfs pull' in $MLEBENCH_DIR"
fi

if [[ -n "${MLEBENCH_VENV:-}" ]]; then
  [[ -x "$MLEBENCH_VENV/bin/python" ]] || "$PYTHON" -m venv "$MLEBENCH_VENV" ||
    die "cannot create venv $MLEBENCH_VENV"
  target_python="$MLEBENCH_VENV/bin/python"
else
  target_python="$PYTHON"
fi
"$target_python" -m pip install --quiet --upgrade pip
"$target_python" -m pip install --quiet -e "$MLEBENCH_DIR" || die "pip install -e $MLEBENCH_DIR failed"

# Import from a scratch directory: importing mlebench creates ./cache in the current directory.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && "$target_python" -c 'import mlebench.grade, mlebench.registry') ||
  die "mlebench installed but does not import; see the pip output above"

printf 'mlebench %s installed from %s into %s\n' \
  "$(git -C "$MLEBENCH_DIR" rev-parse HEAD)" "$MLEBENCH_DIR" "$("$target_python" -c 'import sys; print(sys.prefix)')"
if [[ -n "${MLEBENCH_VENV:-}" ]]; then
  printf 'export MLEBENCH_VENV=%s   # so run_paper.py prepare uses %s/bin/mlebench\n' "$MLEBENCH_VENV" "$MLEBENCH_VENV"
fi
