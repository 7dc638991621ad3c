#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): lambda sweep at rho = 0.1, Thompson sampling, one run per value.
# The paper names lambda in {0, 0.1, 1, ...} [notes] and gives no numbers; lambda = 0.1 is the main BOTS run
# (run_math_qwen2.5_1.5b_bots.sh), as for the rho sweep. The lambda-bias figure (analysis.figures) reads these runs.
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] [LAMBDA_VALUES="0 1.0"] run_math_qwen2.5_1.5b_lambda_sweep.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
for LAMBDA in ${LAMBDA_VALUES:-0 0.05 0.2 0.5 1.0}; do
    METHOD="bots_lambda${LAMBDA}" bots_launch "$@"
done
