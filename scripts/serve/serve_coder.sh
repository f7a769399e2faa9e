#!/usr/bin/env bash
#SBATCH --job-name=mlew-serve-coder
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=3-00:00:00
#SBATCH --output=serve-coder-%j.log
# Start the coder vLLM server (default port from serve.coder in configs/paper.yaml).
#   bash scripts/serve/serve_coder.sh [serve_vllm.sh options]        # on a GPU node
#   sbatch scripts/serve/serve_coder.sh [serve_vllm.sh options]      # from the repository root
# The --gres above matches serve.coder.gpus in configs/paper.yaml; change both together
# (or pass sbatch --gres=gpu:N and --gpus N). Reads and writes what serve_vllm.sh does.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# sbatch runs a copy of this file from its spool directory: find the checkout from the submit dir.
if [[ ! -f "$here/serve_vllm.sh" ]]; then
    here="${MLE_WORLD_ROOT:-${SLURM_SUBMIT_DIR:-.}}/scripts/serve"
fi
exec bash "$here/serve_vllm.sh" --role coder "$@"
