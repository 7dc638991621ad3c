#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct; ours, issue 36): BOTS with the reference columns on 10% of the pool,
# the other 90% imputed from their labelled neighbours in the task graph (bots.selector=bots_partial_ref). The
# reference bill is 10% of paper BOTS's: `label` prints the generations saved (skipped tasks x 16 samples x 2 models).
# Inputs, once (the embedding file is shared with run_math_qwen2.5_1.5b_bots_noref.sh):
#   python -m reference_eval embed --method policy --model Qwen/Qwen2.5-1.5B-Instruct \
#       --data $DATA_DIR/math/train.parquet --out $DATA_DIR/math/embeddings.parquet      # or --method text (no GPU)
#   GURU ships both columns; restrict them to a spread 10% (what collect --label-fraction + merge would give):
#   python -m reference_eval label --data $DATA_DIR/math/train.parquet --label-fraction 0.1 --label-by spread \
#       --embeddings $DATA_DIR/math/embeddings.parquet --mask-columns qwen2.5_7b_pass_rate qwen3_30b_pass_rate \
#       --suffix _ref10 --out-data $DATA_DIR/math/train.ref10.parquet
#   (for references of your own: reference_eval collect ... --label-fraction 0.1 --label-by spread --embeddings ...,
#   then merge: the other rows stay NaN)
# Usage: [DRY_RUN=1] [CPU=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_bots_ref10.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
TRAIN_FILE=${TRAIN_FILE:-$DATA_DIR/math/train.ref10.parquet}
TASK_EMBEDDINGS=${TASK_EMBEDDINGS:-$DATA_DIR/math/embeddings.parquet}
REFERENCE_COLUMNS='[qwen2.5_7b_pass_rate_ref10,qwen3_30b_pass_rate_ref10]' METHOD=bots_ref10 bots_launch "$@"
