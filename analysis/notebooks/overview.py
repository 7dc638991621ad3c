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
# # BOTS: main table, places, overhead and learning curves
#
# The paper's main table (TTB and BSF relative to Random, ETR, rollouts; mean and 95% interval over seeds; one block
# per model size, the paper's rows first), the first/second-place counts, the selection overhead, and the accuracy,
# ETR and estimator-quality curves, from the runs under `$BOTS_RUNS` (default `runs/`). The same functions back
# `python -m analysis.tables` and `python -m analysis.figures`; see `analysis/README.md`.

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from analysis import LoadError, figures, load_runs, overhead, paper_tables, places, render, table_text

RUNS = Path(os.environ.get("BOTS_RUNS", "runs"))
runs = load_runs([RUNS])
domains = sorted({run.domain for run in runs})
print(f"{len(runs)} runs from {RUNS}; domains {domains}; labels {sorted({run.label for run in runs})}")

# %% [markdown]
# ## Main table and first/second places

# %%
main = paper_tables.main_table(runs)
display(Markdown(table_text.to_markdown(main)))
display(Markdown(render.to_markdown(places.to_grid(places.place_counts(main)))))

# %% [markdown]
# ## Selection overhead

# %%
try:
    display(Markdown(render.to_markdown(overhead.to_grid(overhead.overhead_table(runs)))))
except LoadError as exc:
    print(f"no overhead table: {exc}")

# %% [markdown]
# ## Accuracy (raw and best so far), effective task ratio, estimator quality

# %%
for domain in domains:
    shown = [figures.accuracy_figure(runs, domain), figures.etr_figure(runs, domain, smooth=1)]
    try:
        shown.append(figures.estimator_figure(runs, domain))
    except LoadError as exc:
        print(f"no estimator figure: {exc}")
    for fig in shown:
        display(fig)
        plt.close(fig)  # displayed once; closing stops the inline backend from showing it again
