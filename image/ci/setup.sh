#!/bin/sh
# The CI-sized AIDE recipe: scripts/image/build_aide_enroot.sh runs it INSIDE the scratch container
# (a Debian minbase with python3-venv, made by scripts/image/build_ci_image.sh) as root.
#
# Reads $MLE_WORLD_SRC (the harness checkout copied in) and the package indexes pip is pointed at;
# writes the venv /opt/venv (this harness with only the agent's dependencies, pinned as pyproject.toml
# says), /etc/environment and $MLE_WORLD_BUILD_INFO/{pip-freeze,python-version}.txt for the manifest.
# Same shape as image/setup.sh without the ML stack, torch, MLE-bench and build tools.
set -eu

SRC="${MLE_WORLD_SRC:-/opt/mle-world/src}"
INFO="${MLE_WORLD_BUILD_INFO:-/opt/mle-world/build-info}"
VENV=/opt/venv
# What `python -m mle_world.agent` imports (the build fails below if one is missing); versions come
# from pyproject.toml.
AGENT_DEPS="pydantic openai httpx2 tenacity"

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
step() { printf '[ci-setup %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

[ "$(id -u)" = 0 ] || { echo "[ci-setup] error: must run as root (enroot start --root)" >&2; exit 1; }
[ -f "$SRC/pyproject.toml" ] || { echo "[ci-setup] error: no harness checkout at $SRC" >&2; exit 1; }

step "virtual environment $VENV"
python3 -m venv "$VENV"

step "the agent's dependencies ($AGENT_DEPS)"
# shellcheck disable=SC2086  # word splitting of the name list is intended
"$VENV/bin/python" - "$SRC/pyproject.toml" $AGENT_DEPS >/tmp/agent-requirements.txt <<'PY'
import re, sys, tomllib

deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
wanted = set(sys.argv[2:])
for dep in deps:
    if re.match(r"[A-Za-z0-9_.-]+", dep).group(0).lower() in wanted:
        print(dep)
PY
"$VENV/bin/pip" install -q -r /tmp/agent-requirements.txt

step "this harness from $SRC (without the launcher's dependencies)"
"$VENV/bin/pip" install -q --no-deps "$SRC"
"$VENV/bin/python" -c 'import mle_world.agent.__main__; print("agent imports ok")'

step "environment for enroot start (it rebuilds the environment from /etc/environment)"
cat >/etc/environment <<ENV
PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
VIRTUAL_ENV=$VENV
LANG=C.UTF-8
PYTHONUNBUFFERED=1
ENV
# enroot runs the command through a login shell, and Debian's /etc/profile (unlike Ubuntu's) resets
# PATH; its profile.d snippets run after that.
# shellcheck disable=SC2016  # $PATH expands at login, not now
printf 'export PATH=%s/bin:$PATH\n' "$VENV" >/etc/profile.d/mle-world-venv.sh

step "build info for the manifest"
mkdir -p "$INFO"
"$VENV/bin/pip" freeze --all >"$INFO/pip-freeze.txt"
"$VENV/bin/python" --version >"$INFO/python-version.txt" 2>&1
rm -rf /tmp/* /root/.cache
step "done"
