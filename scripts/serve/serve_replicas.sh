#!/usr/bin/env bash
# Start N replicas of one role's vLLM server as Slurm jobs; each adds its URL to an endpoints file
# once it is ready (and removes it when it stops), which `run_paper.py --endpoints-file FILE` reads
# and records in launch.json. No host names to copy by hand.
#
#   bash scripts/serve/serve_replicas.sh --role coder --replicas 2 --endpoints-file runs/endpoints.yaml \
#        [--port-base P] [--wait SECONDS] [--config FILE] [--sbatch-arg ARG]... [-- serve_vllm.sh options]
#
# Each replica is one `sbatch scripts/serve/serve_<role>.sh` job asking for --gres=gpu:N, N its tensor
# parallelism (--gpus after --, else serve.<role>.gpus; unless a --sbatch-arg asks for GPUs itself); add
# or override sbatch options with --sbatch-arg, e.g. --sbatch-arg=--partition=gpu.
# Replica i listens on port P+3i (P: --port-base, else serve.<role>.port in the config, else the
# role's default 8000/8001/8002), so the replicas of all three roles interleave and none collide when
# Slurm places several on one node (vLLM would share a busy port silently). The job ids go to stdout, one
# per line (stop them with scancel). With --wait, the script returns once all N replicas are in
# the endpoints file (exit 1 if they are not within SECONDS). Run it from the repository root.
# Reads the config; writes nothing itself (the jobs write the endpoints file and serve-*.log).
# Exit codes: 2 bad arguments, 1 sbatch failed or --wait timed out, 0 otherwise.
set -Eeuo pipefail

PROG=serve_replicas.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
usage_error() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 2
}

role="" replicas="" endpoints_file="" port_base="" wait_s="" config="$REPO_ROOT/configs/paper.yaml"
python="${PYTHON:-python3}"
sbatch_args=()
serve_args=()
need_value() { [[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --role) need_value "$@"; role="$2"; shift 2 ;;
        --replicas) need_value "$@"; replicas="$2"; shift 2 ;;
        --endpoints-file) need_value "$@"; endpoints_file="$2"; shift 2 ;;
        --port-base) need_value "$@"; port_base="$2"; shift 2 ;;
        --wait) need_value "$@"; wait_s="$2"; shift 2 ;;
        --config) need_value "$@"; config="$2"; shift 2 ;;
        --sbatch-arg=*) sbatch_args+=("${1#--sbatch-arg=}"); shift ;;
        --sbatch-arg) need_value "$@"; sbatch_args+=("$2"); shift 2 ;;
        --) shift; serve_args=("$@"); break ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) usage_error "unknown argument $1 (serve_vllm.sh options go after --)" ;;
    esac
done

case "$role" in
    coder) default_port=8000 ;;
    world) default_port=8001 ;;
    feedback) default_port=8002 ;;
    "") usage_error "no role: pass --role coder|world|feedback" ;;
    *) usage_error "unknown role $role (coder, world or feedback)" ;;
esac
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || usage_error "--replicas must be a positive number, got ${replicas:-nothing}"
[[ -n "$endpoints_file" ]] || usage_error "no --endpoints-file (where the replicas' URLs are collected)"
[[ -z "$wait_s" || "$wait_s" =~ ^[0-9]+$ ]] || usage_error "--wait must be whole seconds, got $wait_s"
command -v sbatch >/dev/null 2>&1 || usage_error "sbatch not found (run this where Slurm commands work)"
cfg_port="" cfg_gpus=""
if [[ -f "$config" ]]; then
    assignments="$("$python" "$HERE/serve_config.py" defaults "$role" --config "$config")" ||
        usage_error "cannot read serve.$role from $config"
    eval "$assignments"
fi
port_base="${port_base:-${cfg_port:-$default_port}}"
# Each job asks Slurm for as many GPUs as its vLLM's tensor parallelism (the #SBATCH --gres line of
# serve_<role>.sh is only a default), unless --sbatch-arg already says how many.
gpus="${cfg_gpus:-1}"
for ((j = 0; j < ${#serve_args[@]}; j++)); do
    case "${serve_args[j]}" in
        --gpus | --tensor-parallel-size) gpus="${serve_args[j + 1]:-$gpus}" ;;
    esac
done
[[ "$gpus" =~ ^[1-9][0-9]*$ ]] || usage_error "gpus must be a positive number, got $gpus"
ask_gpus=(--gres "gpu:$gpus")
for arg in "${sbatch_args[@]}"; do
    case "$arg" in
        --gres* | --gpus* | -G*) ask_gpus=() ;;
    esac
done
[[ "$port_base" =~ ^[0-9]+$ ]] || usage_error "--port-base must be a number, got $port_base"
# The jobs run elsewhere: give them an absolute path on the shared filesystem.
case "$endpoints_file" in
    /*) ;;
    *) endpoints_file="$PWD/$endpoints_file" ;;
esac
mkdir -p "$(dirname "$endpoints_file")"
# The per-role scripts run from the spool directory: tell them where the checkout is.
export MLE_WORLD_ROOT="$REPO_ROOT"

# Three roles: with bases P, P+1, P+2 replica i of each role is on its base + 3i, never on another's port.
port_step=3
for ((i = 0; i < replicas; i++)); do
    port=$((port_base + port_step * i))
    job="$(sbatch --parsable --job-name "mlew-serve-$role-$i" --output "serve-$role-$i-%j.log" \
        "${ask_gpus[@]}" "${sbatch_args[@]}" "$HERE/serve_$role.sh" \
        --port "$port" --config "$config" --endpoints-file "$endpoints_file" "${serve_args[@]}")" || {
        printf '%s: sbatch failed for %s replica %d\n' "$PROG" "$role" "$i" >&2
        exit 1
    }
    printf '%s\n' "${job%%;*}"
done
printf '%s: %d %s replica(s) submitted; URLs collect in %s\n' "$PROG" "$replicas" "$role" "$endpoints_file" >&2

if [[ -n "$wait_s" ]]; then
    "$python" "$HERE/serve_config.py" wait-endpoints "$endpoints_file" "$role=$replicas" \
        --timeout "$wait_s" --interval "${READY_INTERVAL:-2}" >&2 || exit 1
fi
