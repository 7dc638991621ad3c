#!/usr/bin/env bash
# Deprecated: this script ran rho = 0 at lambda = 0.1 with Thompson sampling and logged it as "mopps", which is the rho
# sweep's endpoint, not the paper's BOTS-MoPPS. It still runs that config, now labelled bots_rho0.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
echo "[bots] deprecated: $(basename "$0") runs the rho = 0 sweep point (bots_rho0); the paper's BOTS-MoPPS baseline is" \
    "recipes/run_math_qwen2.5_1.5b_bots_mopps.sh" >&2
RHO_VALUES=0 exec bash "$here/run_math_qwen2.5_1.5b_rho_sweep.sh" "$@"
