#!/usr/bin/env bash
# The AIDE image recipe. scripts/image/build_aide_enroot.sh runs it INSIDE the scratch container
# (Ubuntu 22.04 by default) as root, with network access.
#
# Reads $MLE_WORLD_SRC (the harness checkout copied in: pyproject.toml, src/, image/*.txt) and the
# package indexes; writes the system packages, the venv /opt/venv (Python 3.11, GPU torch, the
# pinned ML stack, this harness, MLE-bench from /opt/mle-bench), /etc/environment, and
# $MLE_WORLD_BUILD_INFO/{pip-freeze,python-version,mlebench-commit,torch}.txt for the manifest.
#
# Knobs (passed with `enroot start -e` by the builder when set on the host):
#   TORCH_CUDA        CUDA variant of the torch wheels (cu126, cu128, cu130, ...): the PyTorch index
#                     https://download.pytorch.org/whl/$TORCH_CUDA. Default: PyPI, whose torch 2.13
#                     Linux wheels are CUDA 13 builds (they need an NVIDIA driver >= 580)
#   TORCH_INDEX_URL   index for the torch wheels (wins over TORCH_CUDA)
#   PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, proxies   honoured by pip, apt and git as usual
#   MLEBENCH_REPO     git URL of MLE-bench (default https://github.com/openai/mle-bench.git)
#   MLEBENCH_COMMIT   commit to check out (default 783b15a, the one reference/mlebench.md describes)
set -Eeuo pipefail

SRC="${MLE_WORLD_SRC:-/opt/mle-world/src}"
INFO="${MLE_WORLD_BUILD_INFO:-/opt/mle-world/build-info}"
VENV=/opt/venv
PY=python3.11
TORCH_CUDA="${TORCH_CUDA:-}"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-${TORCH_CUDA:+https://download.pytorch.org/whl/$TORCH_CUDA}}"
MLEBENCH_REPO="${MLEBENCH_REPO:-https://github.com/openai/mle-bench.git}"
MLEBENCH_COMMIT="${MLEBENCH_COMMIT:-783b15a}"
MLEBENCH_DIR=/opt/mle-bench
REQUIREMENTS="$SRC/image/requirements.txt"
TORCH_REQUIREMENTS="$SRC/image/requirements-torch.txt"

export DEBIAN_FRONTEND=noninteractive
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

step() { printf '[setup %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() {
    printf '[setup] error: %s\n' "$*" >&2
    exit 1
}

[[ "$(id -u)" == 0 ]] || fail "must run as root (enroot start --root)"
[[ -f "$REQUIREMENTS" && -f "$TORCH_REQUIREMENTS" ]] || fail "no pinned requirements under $SRC/image"
[[ -f "$SRC/pyproject.toml" ]] || fail "no harness checkout at $SRC"

step "system packages (Python 3.11 from Ubuntu universe, build tools, git-lfs)"
# Under enroot's user namespace apt cannot drop privileges to the _apt user.
printf 'APT::Sandbox::User "root";\n' >/etc/apt/apt.conf.d/99-enroot-sandbox
apt-get update
apt-get install -y --no-install-recommends \
    ca-certificates curl wget git git-lfs unzip zip p7zip-full xz-utils \
    build-essential pkg-config cmake \
    "$PY" "$PY-venv" "$PY-dev" \
    libgl1 libglib2.0-0 libgomp1 libsndfile1 ffmpeg \
    locales tzdata procps less bubblewrap util-linux
sed -i 's/^# *\(en_US.UTF-8\)/\1/' /etc/locale.gen && locale-gen >/dev/null

step "virtual environment $VENV"
"$PY" -m venv "$VENV"
pip install --upgrade "pip==25.3" "setuptools==80.9.0" "wheel==0.45.1"

step "PyTorch (${TORCH_CUDA:-PyPI default} build)"
torch_index=()
[[ -z "$TORCH_INDEX_URL" ]] || torch_index=(--index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple)
pip install "${torch_index[@]}" -r "$TORCH_REQUIREMENTS"
python - <<'PY' || fail "torch has no CUDA build; set TORCH_INDEX_URL to a CUDA wheel index"
import torch
assert torch.version.cuda, "CPU-only torch"
print("torch", torch.__version__, "CUDA", torch.version.cuda)
PY

step "pinned ML stack"
pip install -r "$REQUIREMENTS" -c "$TORCH_REQUIREMENTS"

step "this harness (agent package) from $SRC"
pip install -c "$REQUIREMENTS" -c "$TORCH_REQUIREMENTS" "$SRC"

step "MLE-bench $MLEBENCH_COMMIT (graders and leaderboards through git-lfs)"
git lfs install --system --skip-repo
rm -rf "$MLEBENCH_DIR"
GIT_LFS_SKIP_SMUDGE=1 git clone --quiet "$MLEBENCH_REPO" "$MLEBENCH_DIR"
git -C "$MLEBENCH_DIR" checkout --quiet --detach "$MLEBENCH_COMMIT"
git -C "$MLEBENCH_DIR" lfs pull
leaderboard="$(find "$MLEBENCH_DIR/mlebench/competitions" -name leaderboard.csv -print -quit)"
[[ -n "$leaderboard" ]] || fail "MLE-bench checkout has no leaderboard.csv"
if [[ "$(head -c 40 "$leaderboard")" == 'version https://git-lfs'* ]]; then
    fail "git lfs pull left pointer files in $MLEBENCH_DIR (leaderboards are needed for grading)"
fi
pip install -c "$REQUIREMENTS" -c "$TORCH_REQUIREMENTS" -e "$MLEBENCH_DIR"

step "checks"
pip check || step "warning: pip check reported conflicts (recorded in the manifest's package list)"
python - <<'PY'
import importlib

for name in ("torch", "torchvision", "numpy", "pandas", "sklearn", "xgboost", "lightgbm", "catboost",
             "transformers", "timm", "mle_world", "mle_world.agent", "mlebench"):
    importlib.import_module(name)
print("imports ok")
PY
command -v mlebench >/dev/null || fail "the mlebench console script is missing"

step "environment for enroot start (it rebuilds the environment from /etc/environment)"
cat >/etc/environment <<EOF
PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
VIRTUAL_ENV=$VENV
LANG=en_US.UTF-8
LC_ALL=en_US.UTF-8
PYTHONUNBUFFERED=1
MLEBENCH_DIR=$MLEBENCH_DIR
EOF

step "build info for the manifest"
mkdir -p "$INFO"
pip freeze --all >"$INFO/pip-freeze.txt"
python --version >"$INFO/python-version.txt" 2>&1
git -C "$MLEBENCH_DIR" rev-parse HEAD >"$INFO/mlebench-commit.txt"
python -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' >"$INFO/torch.txt"

step "cleanup"
apt-get clean
rm -rf /var/lib/apt/lists/* /root/.cache /tmp/* "$MLEBENCH_DIR/.git/lfs/objects"
step "done"
