# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # BOTS: ρ and λ ablations
#
# Runs of the `bots` selector grouped by their ρ (λ held at 0.1) and by their λ (ρ held at 0.1), scored against
# Random with the same seed, from `$BOTS_RUNS` (default `runs/`). A sweep that is absent is reported, not drawn.

# %%
import os
from pathlib import Path

from IPython.display import Markdown, display

from analysis import LoadError, load_runs, tables

RUNS = Path(os.environ.get("BOTS_RUNS", "runs"))
METHOD = os.environ.get("BOTS_ABLATION_METHOD", "bots")
runs = load_runs([RUNS])

# %%
for param in ("rho", "lam"):
    try:
        display(Markdown(tables.to_markdown(tables.ablation_table(runs, param, method=METHOD))))
    except LoadError as exc:
        print(f"no {param} ablation: {exc}")
