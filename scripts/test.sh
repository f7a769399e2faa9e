#!/usr/bin/env bash
# The test command: installs everything the suite needs on a fresh Debian 12 machine (as root),
# starts the local Slurm cluster, runs lint, types, import contracts and the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

APT_PACKAGES=(squashfs-tools bubblewrap shellcheck rsync busybox-static git procps chromium debootstrap)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

log "commit subjects (CONTRIBUTING.md)"
bash scripts/check_commit_subjects.sh

log "pip install -e .[dev]"
python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
# The warm environment above may hold packages pyproject.toml never names: a fresh venv with only the
# declared dependencies must import every module and dry-run the paper sweep from another directory.
fresh_install() {
  local fresh
  fresh="$(mktemp -d "${TMPDIR:-/tmp}/mlew-fresh-install.XXXXXX")"
  python3 -m venv "$fresh/venv"
  "$fresh/venv/bin/python" -m pip install -q --disable-pip-version-check "$PWD"
  (cd "$fresh" && "$fresh/venv/bin/python" - <<'PY'
import importlib, pkgutil, mle_world
# Not the competitions' own grade.py files (loaded by path when graded) nor __main__ (it runs the CLI).
for module in pkgutil.walk_packages(mle_world.__path__, "mle_world."):
    if not module.name.startswith("mle_world.tasks.competitions.") and not module.name.endswith("__main__"):
        importlib.import_module(module.name)
PY
  )
  (cd "$fresh" && "$fresh/venv/bin/mle-world" --regime gated --output-dir out --enroot-image aide.sqsh \
    --dry-run --summary >/dev/null)
  rm -rf "$fresh"
}

# MLE-bench from ../shared/vendor into a fresh venv of its own (it pins kaggle<1.7), from scratch on every
# run so a regression in the install path fails CI on a warm machine too; kept until the next run starts
# it afresh (rerun pytest against it with MLEBENCH_VENV=$MLEBENCH_CI_PREFIX/venv).
MLEBENCH_CI_PREFIX="${MLEBENCH_CI_PREFIX:-${TMPDIR:-/tmp}/mle-world-ci-mlebench}"
mlebench_install() {
  rm -rf "$MLEBENCH_CI_PREFIX/mle-bench" "$MLEBENCH_CI_PREFIX/venv"
  MLEBENCH_ARCHIVE=../shared/vendor/mle-bench-783b15a.tar.gz MLEBENCH_DEPS=grading \
    MLEBENCH_DIR="$MLEBENCH_CI_PREFIX/mle-bench" MLEBENCH_VENV="$MLEBENCH_CI_PREFIX/venv" \
    bash scripts/install_mlebench.sh
}

# Both mostly wait on package downloads: they run beside the builds and checks below, each into its own
# log, and pytest starts only once both succeeded.
logs="$(mktemp -d "${TMPDIR:-/tmp}/mlew-ci-logs.XXXXXX")"
background() { # NAME FUNCTION: run FUNCTION in the background, its output and time in $logs/NAME.log
  local name=$1 fn=$2
  (t0=$SECONDS; "$fn" >"$logs/$name.log" 2>&1; echo "$name: $((SECONDS - t0)) s" >>"$logs/$name.log") &
  pids[$name]=$!
}
declare -A pids=()
log "in the background: the package from scratch in a fresh venv, and MLE-bench from the vendored archive"
background "fresh install" fresh_install
background "mlebench" mlebench_install
finish() { # NAME: wait for a background step; its log's last line, or the whole log and exit 1 if it failed
  local name=$1
  if wait "${pids[$name]}"; then
    tail -n 1 "$logs/$name.log"
  else
    log "$name FAILED:"
    cat "$logs/$name.log"
    exit 1
  fi
}

log "llama.cpp (portable build, checked by a real completion)"
bash scripts/install_llama.sh
# Every run builds Enroot and pyxis from ../shared/vendor once: into /usr/local when that lacks them (a
# fresh machine), else into a temporary prefix, so a warm machine's CI still fails on a broken build path.
t0=$SECONDS
if bash scripts/install_runtimes.sh --check 2>/dev/null; then
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/mlew-runtimes-prefix.XXXXXX")"
  log "Enroot and pyxis: from scratch into the temporary prefix $scratch (installed ones kept)"
  MLEW_RUNTIMES_PREFIX="$scratch" bash scripts/install_runtimes.sh
  rm -rf "$scratch"
else
  log "Enroot and pyxis: from scratch into /usr/local"
  bash scripts/install_runtimes.sh
fi
echo "runtimes built from scratch: $((SECONDS - t0)) s"


log "ruff"
ruff check src tests benchmarks run_paper.py scripts
ruff format --check src tests benchmarks run_paper.py scripts
log "mypy"
mypy
log "import contracts"
lint-imports

cluster=scripts/slurm/local_cluster.sh
stop_cluster() { bash "$cluster" down >/dev/null 2>&1 || true; }
if [[ -f $cluster ]]; then
  log "local Slurm cluster up (with pyxis)"
  bash "$cluster" up --pyxis
  trap stop_cluster EXIT
fi

log "CI image (the real scripts/image/build_aide_enroot.sh; cached by the recipe's hash)"
t0=$SECONDS
bash scripts/image/build_ci_image.sh
echo "CI image: $((SECONDS - t0)) s"

log "background steps"
finish "fresh install"
finish "mlebench"
export MLEBENCH_VENV="$MLEBENCH_CI_PREFIX/venv" MLEBENCH_DIR="$MLEBENCH_CI_PREFIX/mle-bench"
rm -rf "$logs"

# Three pytest-xdist workers by default (MLEW_TEST_WORKERS=N for another number, 0 for one process): the
# suite mostly waits on subprocesses, servers, Slurm and containers, so three fit 2 cores (8 min 27 s of
# pytest wall here against about 17 min serially). The slurm and llama tests keep to one worker each, and
# a module sharing an expensive fixture to one worker (tests/conftest.py, docs/testing.md).
log "pytest (${MLEW_TEST_WORKERS:-3} xdist workers; 0 = serial)"
python3 -m pytest -n "${MLEW_TEST_WORKERS:-3}" --dist loadgroup "$@"
