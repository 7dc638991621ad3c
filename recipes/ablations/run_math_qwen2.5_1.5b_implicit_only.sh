#!/usr/bin/env bash
# Deprecated: this script ran rho = 1 at lambda = 0.1 with Thompson sampling and logged it as "implicit_only", which is
# the rho sweep's endpoint, not the paper's BOTS-DOTS. It still runs that config, now labelled bots_rho1.0.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
echo "[bots] deprecated: $(basename "$0") runs the rho = 1 sweep point (bots_rho1.0); the paper's BOTS-DOTS baseline is" \
    "recipes/run_math_qwen2.5_1.5b_bots_dots.sh" >&2
RHO_VALUES=1.0 exec bash "$here/run_math_qwen2.5_1.5b_rho_sweep.sh" "$@"
