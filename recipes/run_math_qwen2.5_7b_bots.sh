#!/usr/bin/env bash
# GURU math, Qwen2.5-7B-Instruct, BOTS (lambda = rho = 0.1, p* = 0.5).
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] [NNODES=... GPUS_PER_NODE=...] run_math_qwen2.5_7b_bots.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
SELECTOR=bots
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bots_launch "$@"
