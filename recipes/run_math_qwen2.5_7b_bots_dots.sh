#!/usr/bin/env bash
# Main table, GURU math, Qwen2.5-7B-Instruct: BOTS-DOTS, the paper's implicit-evidence-only baseline.
# The settings and their sources are in recipes/common.sh (bots_method_args for the method's own).
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] [NNODES=... GPUS_PER_NODE=...] run_math_qwen2.5_7b_bots_dots.sh [hydra overrides...]
# 7B needs 4 GPUs of 80 GB or 2 of 141 GB (recipes/results/gpu_h200.md); fewer are refused before Ray.
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
METHOD=bots_dots
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bots_launch "$@"
