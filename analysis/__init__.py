"""Regenerate the paper's tables and figures from run logs (issues #7, #14).

- :mod:`analysis.loader`: read runs (our run logs, the simulator's output, TensorBoard events, wandb CSV exports).
- :mod:`analysis.cost_metrics`: rollouts- and wall-clock-to-target on top of :mod:`bots_verl.core.selection_metrics`.
- :mod:`analysis.tables`: ``python -m analysis.tables`` (main table with both model sizes, ρ / λ / selection
  ablations, first/second places, overhead; markdown or LaTeX), built by :mod:`analysis.paper_tables` and rendered by
  :mod:`analysis.table_text`.
- :mod:`analysis.places`, :mod:`analysis.overhead`: the place counts and the selection overhead share.
- :mod:`analysis.table_model`: what a table holds and how a run's row is named and ordered (below all of them).
- :mod:`analysis.figures`: ``python -m analysis.figures`` (accuracy, ETR, estimator-quality and λ-bias figures, mean ±
  95% interval over seeds).
- :mod:`analysis.paired`: ``python -m analysis.paired`` (each selector against Random, paired by seed, with t and
  bootstrap intervals; the toy benchmark's records): :mod:`analysis.paired_inputs`, :mod:`analysis.paired_stats`,
  :mod:`analysis.paired_relative`, :mod:`analysis.paired_report`.
- :mod:`analysis.render`: the markdown / LaTeX renderer.

``analysis/README.md`` documents the inputs and the commands.
"""

from analysis.loader import LoadError, Run, load_run, load_runs

__all__ = ["LoadError", "Run", "load_run", "load_runs"]
