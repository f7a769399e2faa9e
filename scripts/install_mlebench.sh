#!/usr/bin/env bash
# Install MLE-bench (not on PyPI) at a pinned commit, from its git repository (with its LFS
# leaderboards) or from a `git archive` snapshot of it, into the current Python environment or a venv.
#
# Usage:
#   bash scripts/install_mlebench.sh                  # pip install -e into the current env
#   MLEBENCH_VENV=~/.venvs/mlebench bash scripts/install_mlebench.sh
#                                                     # separate venv (keeps its kaggle<1.7 pin
#                                                     # away from the harness); run_paper.py finds
#                                                     # $MLEBENCH_VENV/bin/mlebench for `prepare`
#   MLEBENCH_ARCHIVE=../shared/vendor/mle-bench-783b15a.tar.gz MLEBENCH_VENV=DIR \
#     bash scripts/install_mlebench.sh                # no GitHub: unpack the snapshot into
#                                                     # MLEBENCH_DIR (absent or empty), venv only
# Environment:
#   MLEBENCH_DIR     checkout location (default: ${XDG_DATA_HOME:-$HOME/.local/share}/mle-bench)
#   MLEBENCH_COMMIT  commit to check out (default: the pinned one below); with MLEBENCH_ARCHIVE, the
#                    commit the archive must be a snapshot of
#   MLEBENCH_REPO    clone URL (default: https://github.com/openai/mle-bench.git)
#   MLEBENCH_ARCHIVE a `git archive` .tar.gz of openai/mle-bench to install instead of cloning; its
#                    leaderboards are Git LFS pointers (grading refuses those, in one line)
#   MLEBENCH_DEPS    all (default): every dependency MLE-bench declares; grading: all but tensorflow
#                    (about 600 MB; only the tensorflow2-question-answering grader imports it)
#   PYTHON           interpreter for the current-env install / for creating the venv (default: python3)
#
# The clone needs network access to GitHub; both modes need PyPI. CI (scripts/test.sh) runs the
# archive mode on every run.
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
MLEBENCH_ARCHIVE="${MLEBENCH_ARCHIVE:-}"
MLEBENCH_DEPS="${MLEBENCH_DEPS:-all}"
PYTHON="${PYTHON:-python3}"
# Not needed to grade or aggregate; tensorflow alone is most of a full install's download.
GRADING_SKIPS=(tensorflow)

die() { printf 'install_mlebench: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'install_mlebench: %s\n' "$*" >&2; exit 2; }

# The first line of a file, without a pipe: `head | grep -q` under pipefail can fail with SIGPIPE.
is_lfs_pointer() {
  local first=""
  IFS= read -r first <"$1" || true
  [[ $first == "version https://git-lfs.github.com/spec/"* ]]
}

case $MLEBENCH_DEPS in
  all | grading) ;;
  *) usage_error "MLEBENCH_DEPS=$MLEBENCH_DEPS: expected all or grading" ;;
esac
command -v git >/dev/null 2>&1 || die "git is missing; install it (e.g. apt-get install git)"
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON is missing; set PYTHON=/path/to/python3.11+"

install_from_clone() {
  git lfs version >/dev/null 2>&1 ||
    die "git-lfs is missing; install it (e.g. apt-get install git-lfs) — leaderboards are LFS files"
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
  local sample="$MLEBENCH_DIR/mlebench/competitions/spaceship-titanic/leaderboard.csv"
  if [[ -f "$sample" ]] && is_lfs_pointer "$sample"; then
    die "leaderboards are still git-lfs pointers; run 'git lfs pull' in $MLEBENCH_DIR"
  fi
  source_label="$(git -C "$MLEBENCH_DIR" rev-parse HEAD)"
}

install_from_archive() {
  [[ -n "${MLEBENCH_VENV:-}" ]] ||
    usage_error "MLEBENCH_ARCHIVE needs MLEBENCH_VENV (MLE-bench pins kaggle<1.7: keep it in a venv of its own)"
  [[ -f "$MLEBENCH_ARCHIVE" ]] || usage_error "MLEBENCH_ARCHIVE=$MLEBENCH_ARCHIVE: no such file"
  [[ ! -e "$MLEBENCH_DIR" || -z "$(ls -A "$MLEBENCH_DIR")" ]] ||
    usage_error "MLEBENCH_DIR=$MLEBENCH_DIR is not empty: unpack the archive into a new directory"
  # `git archive` records the commit in the tar's header; the reader stops after it, so the
  # decompressor is not part of any status that counts.
  local commit
  commit="$(git get-tar-commit-id < <(gzip -dc "$MLEBENCH_ARCHIVE" 2>/dev/null))" ||
    usage_error "MLEBENCH_ARCHIVE=$MLEBENCH_ARCHIVE: not a .tar.gz made by git archive (no commit in its header)"
  [[ $commit == "$MLEBENCH_COMMIT"* ]] ||
    usage_error "MLEBENCH_ARCHIVE=$MLEBENCH_ARCHIVE is a snapshot of $commit, not of MLEBENCH_COMMIT=$MLEBENCH_COMMIT"
  mkdir -p "$MLEBENCH_DIR"
  tar -xzf "$MLEBENCH_ARCHIVE" -C "$MLEBENCH_DIR" --strip-components=1 ||
    die "cannot unpack $MLEBENCH_ARCHIVE into $MLEBENCH_DIR"
  [[ -f "$MLEBENCH_DIR/pyproject.toml" && -d "$MLEBENCH_DIR/mlebench" ]] ||
    die "$MLEBENCH_ARCHIVE holds no mle-bench tree (pyproject.toml, mlebench/) under one top directory"
  # setuptools-scm's record of an archive's commit; mle_world.grading.mlebench_version reads it so
  # reports name the commit that graded them (no git checkout here).
  printf 'node: %s\n' "$commit" >"$MLEBENCH_DIR/.git_archival.txt"
  local pointers=0 board
  for board in "$MLEBENCH_DIR"/mlebench/competitions/*/leaderboard.csv; do
    [[ -f $board ]] && is_lfs_pointer "$board" && pointers=$((pointers + 1))
  done
  if ((pointers)); then
    printf 'install_mlebench: note: %d leaderboard.csv files are Git LFS pointers (the archive carries no LFS data);\n' "$pointers"
    printf '  grading those competitions is refused until their real leaderboard.csv is in %s/mlebench/competitions/<id>/\n' "$MLEBENCH_DIR"
  fi
  source_label="$commit (archive $(basename "$MLEBENCH_ARCHIVE"))"
}

source_label=""
if [[ -n $MLEBENCH_ARCHIVE ]]; then
  install_from_archive
else
  install_from_clone
fi

if [[ -n "${MLEBENCH_VENV:-}" ]]; then
  [[ -x "$MLEBENCH_VENV/bin/python" ]] || "$PYTHON" -m venv "$MLEBENCH_VENV" ||
    die "cannot create venv $MLEBENCH_VENV"
  target_python="$MLEBENCH_VENV/bin/python"
else
  target_python="$PYTHON"
fi
pip=("$target_python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
if [[ $MLEBENCH_DEPS == all ]]; then
  "${pip[@]}" -e "$MLEBENCH_DIR" || die "pip install -e $MLEBENCH_DIR failed"
else
  # MLE-bench's own dependency list (pyproject.toml) minus GRADING_SKIPS, then the package without them.
  deps="$("$target_python" - "$MLEBENCH_DIR/pyproject.toml" "${GRADING_SKIPS[@]}" <<'EOF'
import re, sys, tomllib
skips = set(sys.argv[2:])
with open(sys.argv[1], "rb") as f:
    for dep in tomllib.load(f)["project"]["dependencies"]:
        if re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower() not in skips:
            print(dep)
EOF
)" || die "cannot read the dependencies of $MLEBENCH_DIR/pyproject.toml"
  mapfile -t dep_list <<<"$deps"
  "${pip[@]}" "${dep_list[@]}" || die "pip install of MLE-bench's dependencies failed"
  "${pip[@]}" --no-deps -e "$MLEBENCH_DIR" || die "pip install -e $MLEBENCH_DIR failed"
fi

# Import from a scratch directory: importing mlebench creates ./cache in the current directory.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && "$target_python" -c 'import mlebench.grade, mlebench.registry') ||
  die "mlebench installed but does not import; see the pip output above"

printf 'mlebench %s installed from %s into %s (dependencies: %s)\n' "$source_label" "$MLEBENCH_DIR" \
  "$("$target_python" -c 'import sys; print(sys.prefix)')" "$MLEBENCH_DEPS"
if [[ -n "${MLEBENCH_VENV:-}" ]]; then
  printf 'export MLEBENCH_VENV=%s   # so run_paper.py prepare uses %s/bin/mlebench\n' "$MLEBENCH_VENV" "$MLEBENCH_VENV"
fi
