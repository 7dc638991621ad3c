#!/usr/bin/env bash
# The toy benchmark (issue 16): prepare the artifacts, train every selector x seed with real GRPO through
# python -m bots_verl.main on the CPU backend, evaluate the checkpoints, write the tables, figures and summary.md.
# Resumable: a rerun skips finished runs and resumes an interrupted one from its last checkpoint.
#
#   bash recipes/toy/run_benchmark.sh                     # = make toy        (the headline; runs/toy)
#   PROFILE=quick bash recipes/toy/run_benchmark.sh       # = make toy-quick  (runs/toy/quick)
#   PROFILE=full bash recipes/toy/run_benchmark.sh        # every selector on the headline's seeds (runs/toy)
#   PROFILE=beyond bash recipes/toy/run_benchmark.sh      # issue 24's arms: DAPO-DS, GRESO, bots_warm (runs/toy)
#   bash recipes/toy/run_benchmark.sh --seeds 0 1 2 3 4   # any extra option goes to python -m bots_verl.toy.benchmark
#   DRY_RUN=1 bash recipes/toy/run_benchmark.sh           # check the settings and print the plan; nothing is created
set -euo pipefail
PROFILE=${PROFILE:-headline}                   # headline | full | beyond | quick | ci
PYTHON=${PYTHON:-python3}
# shellcheck source=recipes/switches.sh
source "$(dirname "${BASH_SOURCE[0]}")/../switches.sh"
bool_switch DRY_RUN 0 || exit 2                 # 1 (true/yes/on): validate and print the plan only (as every recipe's)
dry_run=()
if [[ $DRY_RUN == 1 ]]; then dry_run=(--dry-run); fi

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
exec "$PYTHON" -m bots_verl.toy.benchmark --profile "$PROFILE" "$@" ${dry_run[@]+"${dry_run[@]}"}
