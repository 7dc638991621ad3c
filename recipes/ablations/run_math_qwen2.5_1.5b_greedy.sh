#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): Thompson sampling vs greedy selection [notes: "Thompson sampling is
# more stable than greedy posterior-mean selection"; no numbers found]. This is the greedy run (BOTS at lambda = rho =
# 0.1 choosing the posterior means closest to p*); the Thompson run is the main BOTS run, run_math_qwen2.5_1.5b_bots.sh.
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_greedy.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
SELECTION=greedy METHOD=bots_greedy bots_launch "$@"
