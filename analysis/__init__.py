"""Regenerate the paper's tables and figures from run logs (issue #7).

- :mod:`analysis.loader`: read runs (our run logs, the simulator's output, TensorBoard events, wandb CSV exports).
- :mod:`analysis.metrics`: rollouts- and wall-clock-to-target on top of :mod:`bots_verl.core.metrics`.
- :mod:`analysis.tables`: ``python -m analysis.tables`` (main table, ρ / λ ablations; markdown or LaTeX).
- :mod:`analysis.figures`: ``python -m analysis.figures`` (accuracy and ETR curves, mean ± 95% interval over seeds).

``analysis/README.md`` documents the inputs and the commands.
"""

from analysis.loader import LoadError, Run, load_run, load_runs

__all__ = ["LoadError", "Run", "load_run", "load_runs"]
