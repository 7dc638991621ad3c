#!/usr/bin/env bash
# Deprecated: the offline easy->hard baseline is a main-table method now; this runs
# recipes/run_math_qwen2.5_1.5b_offline_easy2hard.sh (same config, same label).
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
echo "[bots] deprecated: $(basename "$0") moved to recipes/run_math_qwen2.5_1.5b_offline_easy2hard.sh" >&2
exec bash "$here/../run_math_qwen2.5_1.5b_offline_easy2hard.sh" "$@"
