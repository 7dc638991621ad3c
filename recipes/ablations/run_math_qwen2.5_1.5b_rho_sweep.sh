#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): rho sweep (paper: 0, 0.05, 0.1, 0.2, 0.5, 1.0), one run after another.
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_rho_sweep.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
SELECTOR=bots
for RHO in ${RHO_VALUES:-0 0.05 0.1 0.2 0.5 1.0}; do
    METHOD="bots_rho${RHO}" bots_launch "$@"
done
