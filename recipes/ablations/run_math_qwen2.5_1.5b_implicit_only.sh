#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): BOTS-DOTS, implicit evidence only (rho = 1).
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_implicit_only.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
SELECTOR=implicit_only
bots_launch "$@"
