#!/usr/bin/env bash
# The main job on one machine: a tiny real sweep of configs/demo.yaml in both regimes (local backend,
# sandboxed `process` runtime, local competitions, a real llama.cpp model on loopback), then the audit.
# Re-running resumes: finished trials are skipped, infrastructure failures (e.g. an endpoint that gave
# up) are retried while attempts are left (--retry-failed infra).
# Knobs: OUT (runs/demo), DATA_DIR, PORT (8011),
# N_WORKERS (1), CODER_URL/FEEDBACK_URL/WORLD_URL (use your own servers instead of llama.cpp).
set -euo pipefail
# --help prints the header above; the script takes no arguments (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    ?*) echo "demo.sh: unknown argument $1 (it takes none: set its environment variables, see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

OUT=${OUT:-runs/demo}
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mle-world/demo-data}
PORT=${PORT:-8011}
# One worker: llama.cpp answers one request at a time and reuses the KV cache of the previous prompt's
# prefix, so a trial's coder retries (same prompt, next seed) took 0.2-17 s after one another and 80-230 s
# when another trial's prompt came in between (2026-12-03, the 2-core machine at load 8-11).
N_WORKERS=${N_WORKERS:-1}
log() { printf '\n==> %s\n' "$*"; }
die() { echo "demo.sh: $*" >&2; exit 2; }

# Debian's own python3 refuses `pip install` (PEP 668); say so before anything is installed.
if python3 -c 'import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)'; then
  die "$(command -v python3) is the system's externally managed Python; run in a venv: python3 -m venv ~/venv && . ~/venv/bin/activate"
fi
if ! command -v bwrap >/dev/null; then
  ((EUID == 0)) || die "bubblewrap is not installed; as root: apt-get install bubblewrap"
  log "apt-get install bubblewrap"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
fi
log "pip install -e ."
python3 -m pip install -q --disable-pip-version-check -e .
log "llama.cpp, built portably once (~6 minutes on 2 cores), checked by a real completion"
bash scripts/install_llama.sh

log "prepare the local competitions into $DATA_DIR"
python3 run_paper.py prepare --config configs/demo.yaml --data-dir "$DATA_DIR"

if [[ -z ${CODER_URL:-} ]]; then
  URL="http://127.0.0.1:$PORT/v1"
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/models", timeout=2)' "$URL" \
    2>/dev/null; then
    log "using the server already answering at $URL"
  else
    log "start llama.cpp (gemma3 270M) on port $PORT for all three roles"
    URL=$(DAEMON=1 PORT=$PORT bash scripts/serve/serve_llama_local.sh)
    pidfile="${XDG_CACHE_HOME:-$HOME/.cache}/mle-world/llama-$PORT.pid"
    server_log="${XDG_CACHE_HOME:-$HOME/.cache}/mle-world/llama-$PORT.log"
    server_pid=$(cat "$pidfile")
    # Stop only the server this script started.
    trap 'kill "$server_pid" 2>/dev/null; rm -f "$pidfile"' EXIT
  fi
  CODER_URL=$URL FEEDBACK_URL=$URL WORLD_URL=$URL
fi
python3 run_paper.py check-endpoints --config configs/demo.yaml \
  --coder-url "$CODER_URL" --feedback-url "$FEEDBACK_URL" --world-url "${WORLD_URL:-$CODER_URL}"

RUN_OPTIONS=(--config configs/demo.yaml --grade --runtime process --backend local
  --coder-url "$CODER_URL" --feedback-url "$FEEDBACK_URL" --world-url "${WORLD_URL:-$CODER_URL}"
  --data-dir "$DATA_DIR" --n-workers "$N_WORKERS" --gpu-device none --retry-failed infra)
rc=0
for regime in ungated gated; do
  log "sweep: $regime"
  python3 run_paper.py "${RUN_OPTIONS[@]}" --regime "$regime" --output-dir "$OUT-$regime" || rc=$?
  # Trials only see "connection refused"; say what actually happened, once, with the server's log.
  if [[ -n ${server_pid:-} ]] && ! kill -0 "$server_pid" 2>/dev/null; then
    echo "demo.sh: the llama.cpp server (pid $server_pid) died during the $regime sweep; see $server_log" >&2
    exit 2
  fi
done

log "audit"
python3 run_paper.py audit "$OUT-ungated" "$OUT-gated"
# A sweep with failed trials exits non-zero after the audit has shown them.
exit "$rc"
