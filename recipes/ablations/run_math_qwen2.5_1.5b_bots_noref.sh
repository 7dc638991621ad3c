#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct; ours, issue 36): BOTS with no reference columns at all; each step's
# explicit evidence spreads to similar tasks through the task graph of the pool's embeddings
# (bots.selector=bots_noref). No reference generations: saves the whole pool x 16 samples x 2 models.
# Input, once (shared with run_math_qwen2.5_1.5b_bots_ref10.sh):
#   python -m reference_eval embed --method policy --model Qwen/Qwen2.5-1.5B-Instruct \
#       --data $DATA_DIR/math/train.parquet --out $DATA_DIR/math/embeddings.parquet      # or --method text (no GPU)
# Usage: [DRY_RUN=1] [CPU=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_bots_noref.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
TASK_EMBEDDINGS=${TASK_EMBEDDINGS:-$DATA_DIR/math/embeddings.parquet}
REFERENCE_COLUMNS='[]' METHOD=bots_noref bots_launch "$@"
