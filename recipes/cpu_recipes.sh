#!/usr/bin/env bash
# Every recipe script (30 main-table scripts, 9 ablations with their sweeps) trains for real in its CPU mode (CPU=1):
# STEPS GRPO steps each in verl's trainer, on the GURU-shaped fixture data, with known-answer rollouts. Prints a
# table of each script's wall-clock time and status and writes it to $WORK/cpu_recipes.md; exits 1 if any failed.
#
# Usage: [WORK=runs/cpu_recipes] [STEPS=2] [ONLY=<glob>] [DATA_DIR=<prepared GURU dir>] bash recipes/cpu_recipes.sh
# `make cpu-recipes` runs it. ONLY restricts the scripts (e.g. ONLY='run_code_*'); the sweeps run every value
# (LAMBDA_VALUES / RHO_VALUES shorten them). With DATA_DIR the known answers are built from that data (a code pool
# then needs correct programs from bots_verl.data.guru_fixture's problems).
set -uo pipefail
RECIPES=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${WORK:-runs/cpu_recipes}
STEPS=${STEPS:-2}
ONLY=${ONLY:-*}
PYTHON=${PYTHON:-python3}
# shellcheck source=recipes/switches.sh
source "$RECIPES/switches.sh"
int_knob STEPS 1 || exit 2
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

if [[ -z ${DATA_DIR:-} ]]; then
    DATA_DIR=$WORK/data
    if [[ ! -f $DATA_DIR/logic/train.parquet ]]; then
        "$PYTHON" -m bots_verl.data.guru_fixture "$WORK/guru" >/dev/null || exit 1
        "$PYTHON" -m bots_verl.data.guru --guru-dir "$WORK/guru" --out-dir "$DATA_DIR" 2>"$WORK/prep.log" || exit 1
    fi
fi
for domain in math code logic; do
    "$PYTHON" -m bots_verl.verl_cpu.known_answers "$DATA_DIR/$domain/train.parquet" \
        --out "$WORK/known_answers_$domain.json" >/dev/null || exit 1
done

# issue 36's ablations (bots_ref10, bots_noref) read the math pool's embeddings and a 10% labelled copy of its columns
if [[ ! -f $DATA_DIR/math/train.ref10.parquet ]]; then
    "$PYTHON" -m reference_eval embed --method text --data "$DATA_DIR/math/train.parquet" \
        --out "$DATA_DIR/math/embeddings.parquet" --force >/dev/null || exit 1
    "$PYTHON" -m reference_eval label --data "$DATA_DIR/math/train.parquet" --label-fraction 0.1 --label-by spread \
        --embeddings "$DATA_DIR/math/embeddings.parquet" --mask-columns qwen2.5_7b_pass_rate qwen3_30b_pass_rate \
        --suffix _ref10 --out-data "$DATA_DIR/math/train.ref10.parquet" >/dev/null || exit 1
fi

rm -rf "$WORK/runs"   # every run starts fresh (a run directory holding logged steps would be resumed or refused)
table=$WORK/cpu_recipes.md
{
    echo "| script | seconds | status |"
    echo "|---|---:|---|"
} >"$table"
failed=0
total_start=$SECONDS
for script in "$RECIPES"/run_*_qwen2.5_*.sh "$RECIPES"/ablations/run_*.sh; do
    name=${script#"$RECIPES"/}
    # shellcheck disable=SC2053
    [[ $(basename "$script") == $ONLY ]] || continue
    domain=$(basename "$script" | cut -d_ -f2)
    log=$WORK/logs/${name//\//_}.log
    mkdir -p "$WORK/logs"
    start=$SECONDS
    if CPU=1 DATA_DIR=$DATA_DIR RUN_ROOT=$WORK/runs PYTHON=$PYTHON CPU_MODEL_DIR=$WORK/model \
        bash "$script" "trainer.total_training_steps=$STEPS" \
        "+actor_rollout_ref.rollout.custom.known_answers=$WORK/known_answers_$domain.json" >"$log" 2>&1; then
        status=ok
    else
        status="FAILED (log: $log)"
        failed=$((failed + 1))
    fi
    echo "| $name | $((SECONDS - start)) | $status |" | tee -a "$table"
done
echo "" >>"$table"
echo "total: $((SECONDS - total_start)) s, $failed failed, $STEPS steps per run, $(nproc) cores" | tee -a "$table"
[[ $failed == 0 ]]
