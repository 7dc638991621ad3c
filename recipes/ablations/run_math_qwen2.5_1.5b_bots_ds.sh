#!/usr/bin/env bash
# Ablation (GURU math, Qwen2.5-1.5B-Instruct; issue 48): paper BOTS with DAPO's dynamic sampling (verl's
# algorithm.filter_groups on acc) and DAPO's clip-higher (0.28). Groups that come back all right or all wrong are
# discarded and the step is refilled until it holds 32 mixed groups; every generated group, kept or discarded, is
# evidence for its task's posterior, and each refill is selected from the posterior as updated so far. DAPO's
# overlong reward shaping (reward_manager=dapo) is left out: our rewards are the paper's binary ones.
# Toy-testbed result: recipes/toy/results/ (the bots_ds rows).
# Usage: [DRY_RUN=1] [CPU=1] [DATA_DIR=...] [MODEL_PATH=...] run_math_qwen2.5_1.5b_bots_ds.sh [hydra overrides...]
set -euo pipefail
DOMAIN=math
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-1.5B-Instruct}
CLIP_RATIO_HIGH=${CLIP_RATIO_HIGH:-0.28}
# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
METHOD=bots_ds bots_launch "$@"
