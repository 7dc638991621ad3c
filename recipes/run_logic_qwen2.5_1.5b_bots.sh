#!/usr/bin/env bash
# Main table, GURU logic, Qwen2.5-1.5B-Instruct: BOTS with the paper's defaults.
# The settings and their sources are in recipes/common.sh (bots_method_args for the method's own).
# Usage: [DRY_RUN=1] [DATA_DIR=...] [MODEL_PATH=...] [NNODES=... GPUS_PER_NODE=...] run_logic_qwen2.5_1.5b_bots.sh [hydra overrides...]
set -euo pipefail
DOMAIN=logic
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
METHOD=bots
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bots_launch "$@"
