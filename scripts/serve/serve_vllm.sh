#!/usr/bin/env bash
# Start one vLLM OpenAI-compatible server for a role (coder, world or feedback), wait until
# GET /v1/models answers, print the URL to use, then stay in the foreground until vLLM exits.
# Works directly on a GPU node and inside an sbatch job (see serve_coder.sh & co.).
#
#   bash scripts/serve/serve_vllm.sh --role coder [--model M] [--port P] [--gpus N] [--max-model-len L]
#        [--devices 0,1] [--host H] [--served-model-name NAME] [--tool-call-parser P]
#        [--config FILE] [--timeout SECONDS] [--endpoints-file FILE] [-- EXTRA VLLM ARGS...]
#
# Each option has an environment equivalent: ROLE MODEL PORT GPUS (or TENSOR_PARALLEL)
# MAX_MODEL_LEN DEVICES HOST SERVED_MODEL_NAME TOOL_CALL_PARSER SERVE_CONFIG READY_TIMEOUT
# ENDPOINTS_FILE. With an endpoints file (on a filesystem the sweep sees), the URL is added to the
# role's list there once ready and removed when the server stops (see serve_replicas.sh).
# Precedence: command line, then environment, then `serve.<role>` in configs/paper.yaml
# (model, port, gpus, max_model_len, extra_args), then built-in defaults (ports 8000/8001/8002).
# Other knobs: VLLM (the vllm executable), PYTHON (python with PyYAML), VLLM_API_KEY (vLLM
# requires it as a Bearer key when set), SERVE_PUBLIC_HOST (host name printed in the URL).
#
# Sampling: vLLM applies a checkpoint's generation_config.json (e.g. Qwen2.5's top_p 0.8, top_k 20,
# repetition_penalty 1.05) to every parameter a request leaves out; the agent sends only temperature,
# max_tokens and seed, so the script passes --generation-config vllm (vLLM's neutral defaults) unless
# the extra arguments set --generation-config themselves. A port something already listens on is
# refused, and the server counts as ready only when /v1/models lists the expected model id.
#
# Tool calls: the agent forces its review tool with a *named* tool_choice, which vLLM serves
# without extra flags. Only tool_choice="auto" needs --enable-auto-tool-choice and a
# --tool-call-parser; pass --tool-call-parser NAME (e.g. hermes for Qwen2.5) to add both.
#
# Reads the config and the environment; writes nothing but the server's output.
# Exit codes: 2 bad arguments, 1 vLLM died or was not ready in time, else vLLM's own exit code.
set -Eeuo pipefail

PROG=serve_vllm.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"

usage_error() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 2
}
say() { printf '%s: %s\n' "$PROG" "$*" >&2; }

role="${ROLE:-}"
model="${MODEL:-}"
port="${PORT:-}"
gpus="${GPUS:-${TENSOR_PARALLEL:-}}"
max_model_len="${MAX_MODEL_LEN:-}"
devices="${DEVICES:-}"
host="${HOST:-0.0.0.0}"
served_name="${SERVED_MODEL_NAME:-}"
tool_parser="${TOOL_CALL_PARSER:-}"
config="${SERVE_CONFIG:-$REPO_ROOT/configs/paper.yaml}"
timeout="${READY_TIMEOUT:-1800}"
endpoints_file="${ENDPOINTS_FILE:-}"
vllm="${VLLM:-vllm}"
python="${PYTHON:-python3}"
extra=()

need_value() { [[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --role) need_value "$@"; role="$2"; shift 2 ;;
        --model) need_value "$@"; model="$2"; shift 2 ;;
        --port) need_value "$@"; port="$2"; shift 2 ;;
        --gpus | --tensor-parallel-size) need_value "$@"; gpus="$2"; shift 2 ;;
        --max-model-len) need_value "$@"; max_model_len="$2"; shift 2 ;;
        --devices) need_value "$@"; devices="$2"; shift 2 ;;
        --host) need_value "$@"; host="$2"; shift 2 ;;
        --served-model-name) need_value "$@"; served_name="$2"; shift 2 ;;
        --tool-call-parser) need_value "$@"; tool_parser="$2"; shift 2 ;;
        --config) need_value "$@"; config="$2"; shift 2 ;;
        --timeout) need_value "$@"; timeout="$2"; shift 2 ;;
        --endpoints-file) need_value "$@"; endpoints_file="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) usage_error "unknown argument $1 (vLLM arguments go after --)" ;;
    esac
done

case "$role" in
    coder) default_port=8000 ;;
    world) default_port=8001 ;;
    feedback) default_port=8002 ;;
    "") usage_error "no role: pass --role coder|world|feedback (or set ROLE)" ;;
    *) usage_error "unknown role $role (coder, world or feedback)" ;;
esac

command -v "$python" >/dev/null 2>&1 || usage_error "$python not found (set PYTHON to a python with PyYAML)"
cfg_model="" cfg_port="" cfg_gpus="" cfg_max_model_len=""
cfg_extra_args=()
if [[ -f "$config" ]]; then
    assignments="$("$python" "$HERE/serve_config.py" defaults "$role" --config "$config")" ||
        usage_error "cannot read serve.$role from $config"
    eval "$assignments"
elif [[ -n "${SERVE_CONFIG:-}" || "$config" != "$REPO_ROOT/configs/paper.yaml" ]]; then
    usage_error "config $config does not exist"
fi

model="${model:-$cfg_model}"
port="${port:-${cfg_port:-$default_port}}"
gpus="${gpus:-${cfg_gpus:-1}}"
max_model_len="${max_model_len:-$cfg_max_model_len}"

[[ -n "$model" ]] || usage_error "no model for $role: pass --model or set serve.$role.model in $config"
if [[ ! "$port" =~ ^[0-9]+$ ]] || ((10#$port < 1 || 10#$port > 65535)); then
    usage_error "port must be a number from 1 to 65535, got $port"
fi
[[ "$gpus" =~ ^[1-9][0-9]*$ ]] || usage_error "gpus must be a positive number, got $gpus"
[[ -z "$max_model_len" || "$max_model_len" =~ ^[1-9][0-9]*$ ]] ||
    usage_error "max-model-len must be a positive number, got $max_model_len"
[[ "$timeout" =~ ^[0-9]+$ ]] || usage_error "timeout must be whole seconds, got $timeout"
command -v "$vllm" >/dev/null 2>&1 || usage_error "$vllm not found (pip install vllm, or set VLLM=/path/to/vllm)"

if [[ -n "$devices" ]]; then
    export CUDA_VISIBLE_DEVICES="$devices"
fi
# Tensor parallelism needs that many GPUs: with fewer visible (Slurm's --gres smaller than --gpus) vLLM
# would only fail after its start-up; with more, the rest idle.
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
    IFS=, read -r -a visible <<<"$CUDA_VISIBLE_DEVICES"
    if ((${#visible[@]} < gpus)); then
        usage_error "--gpus $gpus (tensor parallel) but ${#visible[@]} GPU(s) visible (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES): ask for $gpus (sbatch --gres=gpu:$gpus, --devices) or pass --gpus ${#visible[@]}"
    elif ((${#visible[@]} > gpus)); then
        say "warning: ${#visible[@]} GPUs visible (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES) and tensor parallel $gpus: $((${#visible[@]} - gpus)) will idle"
    fi
fi

case "$host" in
    0.0.0.0 | "::" | "") poll_host=127.0.0.1 ;;
    *) poll_host="$host" ;;
esac
# vLLM binds its port with SO_REUSEPORT: a second server of the same user on a busy port starts without
# an error and the kernel splits the connections between the two (requests for one role reach another
# role's model). Refuse a port something already listens on.
if "$python" "$HERE/serve_config.py" port-in-use "$poll_host" "$port"; then
    say "port $port on $(hostname 2>/dev/null || echo this node) is already in use (another server listens there); pick a free one with --port"
    exit 1
fi

# The model id the server must list once ready; generation defaults from the harness, not the checkpoint.
expect="${served_name:-$model}"
generation_config=(--generation-config vllm)
for arg in "${cfg_extra_args[@]}" "${extra[@]}"; do
    case "$arg" in
        --served-model-name | --served-model-name=*) expect="" ;;
        --generation-config | --generation-config=*) generation_config=() ;;
    esac
done

cmd=("$vllm" serve "$model" --host "$host" --port "$port" --tensor-parallel-size "$gpus")
[[ -z "$max_model_len" ]] || cmd+=(--max-model-len "$max_model_len")
[[ -z "$served_name" ]] || cmd+=(--served-model-name "$served_name")
[[ -z "$tool_parser" ]] || cmd+=(--enable-auto-tool-choice --tool-call-parser "$tool_parser")
cmd+=("${generation_config[@]}" "${cfg_extra_args[@]}" "${extra[@]}")

say "starting $role server: ${cmd[*]}"
"${cmd[@]}" &
server_pid=$!

waiter_pid=""
registered=""
ready_file="$(mktemp "${TMPDIR:-/tmp}/serve_vllm.XXXXXX")"
# shellcheck disable=SC2317  # invoked by the traps
unregister() {
    if [[ -n "$registered" ]]; then
        "$python" "$HERE/serve_config.py" unregister "$endpoints_file" "$role" "$registered" || true
        registered=""
    fi
}
# shellcheck disable=SC2317  # invoked by the trap
stop_server() {
    trap - INT TERM
    unregister
    say "stopping the $role server (pid $server_pid)"
    [[ -z "$waiter_pid" ]] || kill -TERM "$waiter_pid" 2>/dev/null || true
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    exit 143
}
trap stop_server INT TERM
trap 'rm -f "$ready_file"' EXIT

public_host="${SERVE_PUBLIC_HOST:-}"
if [[ -z "$public_host" ]]; then
    case "$host" in
        0.0.0.0 | "::" | "") public_host="$(hostname -f 2>/dev/null || hostname 2>/dev/null || echo localhost)" ;;
        *) public_host="$host" ;;
    esac
fi

# The wait runs in the background so that a TERM/INT reaches the trap at once.
"$python" "$HERE/serve_config.py" wait "http://$poll_host:$port/v1/models" ${expect:+--expect "$expect"} \
    --timeout "$timeout" --pid "$server_pid" --interval "${READY_INTERVAL:-2}" >"$ready_file" &
waiter_pid=$!
status=0
wait "$waiter_pid" || status=$?
waiter_pid=""
served="$(cat "$ready_file")"
if ((status == 3)); then
    server_status=0
    wait "$server_pid" || server_status=$?
    say "vLLM exited (status $server_status) before $role was ready on port $port"
    exit 1
elif ((status == 4)); then
    say "port $port answers for ${served:-no model}, not $expect: another server holds the port; stopping vLLM"
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    exit 1
elif ((status != 0)); then
    say "$role server not ready on port $port after ${timeout}s; stopping it"
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    exit 1
fi

url="http://$public_host:$port/v1"
upper="$(printf '%s' "$role" | tr '[:lower:]' '[:upper:]')"
say "$role server ready: serves ${served:-?} at $url"
printf '%s_URL=%s\n' "$upper" "$url"
if [[ -n "$endpoints_file" ]]; then
    "$python" "$HERE/serve_config.py" register "$endpoints_file" "$role" "$url"
    registered="$url"
    say "$role replica $url added to $endpoints_file"
fi

server_status=0
wait "$server_pid" || server_status=$?
unregister
exit "$server_status"
