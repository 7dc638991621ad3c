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
# # BOTS: ρ, λ and selection-rule ablations
#
# Runs of the `bots` selector grouped by their ρ (λ held at 0.1), by their λ (ρ held at 0.1) and by their selection
# rule (Thompson sampling vs greedy), scored against Random with the same seed, from `$BOTS_RUNS` (default `runs/`),
# and the λ figure (Thompson-sampled p against the observed pass rate). An ablation that is absent is reported, not
# drawn.

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from analysis import LoadError, figures, load_runs, paper_tables, table_text

RUNS = Path(os.environ.get("BOTS_RUNS", "runs"))
METHOD = os.environ.get("BOTS_ABLATION_METHOD", "bots")
runs = load_runs([RUNS])

# %%
for param in paper_tables.ABLATION_PARAMS:
    try:
        display(Markdown(table_text.to_markdown(paper_tables.ablation_table(runs, param, method=METHOD))))
    except LoadError as exc:
        print(f"no {param} ablation: {exc}")

# %%
for domain in sorted({run.domain for run in runs}):
    try:
        fig = figures.lambda_bias_figure(runs, domain, method=METHOD)
    except LoadError as exc:
        print(f"no λ figure: {exc}")
        continue
    display(fig)
    plt.close(fig)
