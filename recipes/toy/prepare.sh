#!/usr/bin/env bash
# Build the toy testbed's artifacts (issue 16): data, warmed-up policy and references, reference columns, calibration.
# Resumable: a rerun skips every finished stage. Runs niced (other jobs share the cores) and one thread per job.
#
#   bash recipes/toy/prepare.sh                 # full benchmark artifacts in runs/toy/data
#   PROFILE=quick bash recipes/toy/prepare.sh   # the reduced `make toy-quick` set in runs/toy/quick/data
#   bash recipes/toy/prepare.sh --policies 3    # any extra option goes to python -m bots_verl.toy.prepare
#   DRY_RUN=1 bash recipes/toy/prepare.sh       # check the settings and print the plan; nothing is created
set -euo pipefail
PROFILE=${PROFILE:-full}                       # full | quick | ci
if [[ "$PROFILE" == full ]]; then default_out=runs/toy/data; else default_out=runs/toy/$PROFILE/data; fi
OUT=${OUT:-$default_out}                       # artifact directory
SEED=${SEED:-0}                                # benchmark seed: data, initial weights, warm-up data order
JOBS=${JOBS:-2}                                # warm-ups / reference collections at a time (one thread each)
NICE=${NICE:-10}                               # niceness of the whole build
PYTHON=${PYTHON:-python3}
# shellcheck source=recipes/switches.sh
source "$(dirname "${BASH_SOURCE[0]}")/../switches.sh"
bool_switch DRY_RUN 0 || exit 2                 # 1 (true/yes/on): validate and print the plan only (as every recipe's)
dry_run=()
if [[ $DRY_RUN == 1 ]]; then dry_run=(--dry-run); fi

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
exec nice -n "$NICE" "$PYTHON" -m bots_verl.toy.prepare --out "$OUT" --seed "$SEED" --profile "$PROFILE" \
    --jobs "$JOBS" "$@" ${dry_run[@]+"${dry_run[@]}"}
