"""Reference pass-rate columns for BOTS: collect a model's per-prompt pass rates, merge them as a column, check them.

``collect`` samples n responses per prompt of a verl-format parquet (vLLM on GPUs, or transformers for small models),
scores them with the training rewards and appends per-prompt results to a resumable JSON-lines file; ``merge`` adds
``successes / attempts`` as a float column matched by stable task id (NaN where no result exists); ``stats`` shows
histograms, correlations and weak > strong counts. See ``reference_eval/README.md``.
"""

from bots_verl.fileio import LockError

from .collect import CollectReport, collect
from .data import DataError
from .merge import MergeReport, merge
from .results import ResultsError, Settings, read_results
from .scoring import ScoreError, Scorer, resolve_scorer
from .stats import compute_stats

__all__ = [
    "CollectReport",
    "DataError",
    "LockError",
    "MergeReport",
    "ResultsError",
    "ScoreError",
    "Scorer",
    "Settings",
    "collect",
    "compute_stats",
    "merge",
    "read_results",
    "resolve_scorer",
]
