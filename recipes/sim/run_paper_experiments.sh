#!/usr/bin/env bash
# The paper's experiments in the CPU simulator (bots_verl.sim), labelled as the verl recipes label them: the five
# main-table methods on the math, code and logic scenarios, and the rho, lambda and selection-rule ablations on math.
# Each method's hyperparameters come from bots_verl/runlog.py METHODS, the table the verl runs are checked against
# (recipes/common.sh sets the same values and cites their sources). A simulator, not GPU training: its numbers show the
# pipeline and the methods' qualitative behaviour, not the paper's.
# Usage: [OUT=runs/sim-paper] [SEEDS=5] [STEPS=300] [EVAL_EVERY=5] [PYTHON=python3] [SIM_ARGS="--pool-size 500"] \
#        run_paper_experiments.sh
# Then (recipes/README.md, section 7; the measured tables: recipes/results/sim/paper_experiments.md):
#   python -m analysis.tables --runs $OUT/paper-math $OUT/paper-code $OUT/paper-logic --methods paper --table all
#   python -m analysis.tables --runs $OUT/ablations-math --table rho   (lam, selection)
#   python -m analysis.figures --runs $OUT/ablations-math --out figures/
set -euo pipefail
OUT=${OUT:-runs/sim-paper}
SEEDS=${SEEDS:-5}
STEPS=${STEPS:-300}
EVAL_EVERY=${EVAL_EVERY:-5}
PYTHON=${PYTHON:-python3}
read -r -a SIM_EXTRA <<<"${SIM_ARGS:-}"

# --variant LABEL=SELECTOR:K=V,... for a method label (values as JSON, so "none" stays a string)
variant() {
    "$PYTHON" -c '
import json, sys
from bots_verl.runlog import method_spec
spec = method_spec(sys.argv[1])
print(f"{spec.label}={spec.selector}:" + ",".join(f"{k}={json.dumps(v)}" for k, v in spec.hparams.items()))
' "$1"
}

sim() {
    "$PYTHON" -m bots_verl.sim --seeds "$SEEDS" --steps "$STEPS" --eval-every "$EVAL_EVERY" --no-plots --no-progress \
        ${SIM_EXTRA[@]+"${SIM_EXTRA[@]}"} "$@"
}

main_args=(--methods random,offline_easy2hard --variant "$(variant bots_mopps)" --variant "$(variant bots_dots)"
    --variant "$(variant bots)")
for scenario in math code logic; do
    echo "[sim] main table: $scenario -> $OUT/paper-$scenario" >&2
    sim --scenario "$scenario" "${main_args[@]}" --out "$OUT/paper-$scenario" >/dev/null
done

ablation_args=(--methods random --variant "$(variant bots)" --variant "$(variant bots_greedy)")
for label in bots_rho0 bots_rho0.05 bots_rho0.2 bots_rho0.5 bots_rho1.0 \
    bots_lambda0 bots_lambda0.05 bots_lambda0.2 bots_lambda0.5 bots_lambda1.0; do
    ablation_args+=(--variant "$(variant "$label")")
done
echo "[sim] ablations: math -> $OUT/ablations-math" >&2
sim --scenario math "${ablation_args[@]}" --out "$OUT/ablations-math" >/dev/null
