#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct): static curriculum, easiest first by the reference pass rates.
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_offline_easy2hard.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
SELECTOR=offline_easy2hard
bots_launch "$@"
