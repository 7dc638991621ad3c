#!/usr/bin/env bash
# The paper's pipeline on CPU in one command, on GURU-shaped data: check an install before booking GPUs.
#
#   reference columns -> data -> training -> tables, each step the command a user runs on the cluster:
#   1. a miniature GURU copy (bots_verl.data.guru_fixture: every domain's file schemas and quirks) and the data prep
#      (python -m bots_verl.data.guru), as for the real GURU;
#   2. two tiny local reference models (bots_verl.verl_cpu.tiny_model, different seeds and widths), sampled on every
#      train task with `python -m reference_eval collect --backend transformers`, merged as two new reference columns
#      (`reference_eval merge`) and checked (`reference_eval stats`);
#   3. Random and BOTS trained through the recipe scripts' CPU mode (CPU=1) on those columns, in every domain, with
#      known-answer rollouts (bots_verl.verl_cpu.known_answers) so that the rewards and the posterior see real
#      successes;
#   4. the main table from the run logs (python -m analysis.tables).
#
# Usage: [WORK=runs/cpu_pipeline] [DOMAINS="math code logic"] [STEPS=2] bash recipes/cpu_pipeline.sh
# `make cpu-pipeline` runs it; recipes/results/cpu_pipeline.md gives its time on 2 cores.
# Random tiny models score 0 on every task, so the merged columns are all 0 (valid, and a test of a flat reference);
# on real models they are the pass rates BOTS's implicit evidence needs.
set -euo pipefail
RECIPES=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${WORK:-runs/cpu_pipeline}
DOMAINS=${DOMAINS:-math code logic}
STEPS=${STEPS:-2}
SAMPLES=${SAMPLES:-4}                           # responses per task and reference model (the paper: 16)
PYTHON=${PYTHON:-python3}
# shellcheck source=recipes/switches.sh
source "$RECIPES/switches.sh"
int_knob STEPS 1 || exit 2
int_knob SAMPLES 1 || exit 2
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
start=$SECONDS
trap 'echo "cpu_pipeline failed at line $LINENO; logs in $WORK" >&2' ERR
say() { echo "[cpu_pipeline $((SECONDS - start))s] $*" >&2; }

say "1/4 data: a miniature GURU copy and the data prep"
rm -rf "$WORK/guru" "$WORK/data"
"$PYTHON" -m bots_verl.data.guru_fixture "$WORK/guru" >/dev/null
"$PYTHON" -m bots_verl.data.guru --guru-dir "$WORK/guru" --out-dir "$WORK/data" 2>"$WORK/prep.log"

say "2/4 reference columns: two tiny reference models, collect, merge, stats (log: $WORK/refs.log)"
mkdir -p "$WORK/refs"
: >"$WORK/refs.log"
"$PYTHON" -m bots_verl.verl_cpu.tiny_model "$WORK/models/weak" --seed 1 --hidden-size 32 >/dev/null
"$PYTHON" -m bots_verl.verl_cpu.tiny_model "$WORK/models/strong" --seed 2 --hidden-size 64 >/dev/null
for domain in $DOMAINS; do
    train=$WORK/data/$domain/train.parquet
    for ref in weak strong; do
        "$PYTHON" -m reference_eval collect --backend transformers --device cpu --data "$train" \
            --model "$WORK/models/$ref" --out "$WORK/refs/${domain}_$ref.jsonl" -n "$SAMPLES" --max-tokens 48 \
            --no-progress >>"$WORK/refs.log" 2>&1
        "$PYTHON" -m reference_eval merge --data "$train" --results "$WORK/refs/${domain}_$ref.jsonl" \
            --column "tiny_${ref}_pass_rate" --in-place >>"$WORK/refs.log" 2>&1
    done
    "$PYTHON" -m reference_eval stats --data "$train" --columns tiny_weak_pass_rate tiny_strong_pass_rate \
        --out-dir "$WORK/refs/stats_$domain" >/dev/null
    "$PYTHON" -m bots_verl.verl_cpu.known_answers "$train" --out "$WORK/data/$domain/known_answers.json" >/dev/null
done

say "3/4 training: random and bots per domain through the recipe scripts (CPU=1, $STEPS steps)"
rm -rf "$WORK/runs"
for domain in $DOMAINS; do
    for method in random bots; do
        say "  $domain $method"
        CPU=1 DATA_DIR=$WORK/data RUN_ROOT=$WORK/runs PYTHON=$PYTHON CPU_MODEL_DIR=$WORK/models/policy \
            REFERENCE_COLUMNS='[tiny_weak_pass_rate,tiny_strong_pass_rate]' TEST_FREQ=1 \
            bash "$RECIPES/run_${domain}_qwen2.5_1.5b_${method}.sh" "trainer.total_training_steps=$STEPS" \
            "+actor_rollout_ref.rollout.custom.known_answers=$WORK/data/$domain/known_answers.json" \
            >"$WORK/train_${domain}_$method.log" 2>&1 ||
            { echo "training $domain $method failed; log: $WORK/train_${domain}_$method.log" >&2; exit 1; }
    done
done

say "4/4 tables: the main table from the run logs"
"$PYTHON" -m analysis.tables --runs "$WORK/runs" --methods random bots --format md --out "$WORK/table_main.md"
cat "$WORK/table_main.md"
say "done in $((SECONDS - start)) s: $WORK/table_main.md"
