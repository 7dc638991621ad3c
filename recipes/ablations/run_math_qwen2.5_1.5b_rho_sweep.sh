#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): rho sweep at lambda = 0.1, Thompson sampling, one run per value.
# The paper's rows are rho = 0, 0.05, 0.1, 0.2, 0.5, 1.0 [notes]. Its rho = 0.1 row repeats the main table's BOTS
# numbers (0.85 / 0.72 / 1.06 on math TTB50 / TTB100 / BSF25), so that row is the main BOTS run
# (run_math_qwen2.5_1.5b_bots.sh) and is not run again here; add 0.1 to RHO_VALUES to run it anyway.
# The rho = 0 and rho = 1 runs are not the BOTS-MoPPS / BOTS-DOTS baselines (those have their own lambda and selection
# rule: run_*_bots_mopps.sh, run_*_bots_dots.sh); the paper's numbers for them differ too.
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] [RHO_VALUES="0 0.05"] run_math_qwen2.5_1.5b_rho_sweep.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
for RHO in ${RHO_VALUES:-0 0.05 0.2 0.5 1.0}; do
    METHOD="bots_rho${RHO}" bots_launch "$@"
done
