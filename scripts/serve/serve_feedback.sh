#!/usr/bin/env bash
#SBATCH --job-name=mlew-serve-feedback
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=3-00:00:00
#SBATCH --output=serve-feedback-%j.log
# Start the feedback vLLM server (default port from serve.feedback in configs/paper.yaml).
#   bash scripts/serve/serve_feedback.sh [serve_vllm.sh options]        # on a GPU node
#   sbatch scripts/serve/serve_feedback.sh [serve_vllm.sh options]      # from the repository root
# The --gres above matches serve.feedback.gpus in configs/paper.yaml; change both together
# (or pass sbatch --gres=gpu:N and --gpus N). Reads and writes what serve_vllm.sh does.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# sbatch runs a copy of this file from its spool directory: find the checkout from the submit dir.
if [[ ! -f "$here/serve_vllm.sh" ]]; then
    here="${MLE_WORLD_ROOT:-${SLURM_SUBMIT_DIR:-.}}/scripts/serve"
fi
exec bash "$here/serve_vllm.sh" --role feedback "$@"
