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
# # BOTS: main table and learning curves
#
# The paper's main table (TTB and BSF relative to Random, ETR, rollouts; mean and 95% interval over seeds) and the
# accuracy and ETR curves, from the runs under `$BOTS_RUNS` (default `runs/`). The same functions back
# `python -m analysis.tables` and `python -m analysis.figures`; see `analysis/README.md`.

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from analysis import figures, load_runs, tables

RUNS = Path(os.environ.get("BOTS_RUNS", "runs"))
runs = load_runs([RUNS])
domains = sorted({run.domain for run in runs})
print(f"{len(runs)} runs from {RUNS}; domains {domains}; labels {sorted({run.label for run in runs})}")

# %% [markdown]
# ## Main table

# %%
main = tables.main_table(runs)
display(Markdown(tables.to_markdown(main)))

# %% [markdown]
# ## Accuracy (raw and best so far) and effective task ratio

# %%
for domain in domains:
    for fig in (figures.accuracy_figure(runs, domain), figures.etr_figure(runs, domain, smooth=1)):
        display(fig)
        plt.close(fig)  # displayed once; closing stops the inline backend from showing it again
