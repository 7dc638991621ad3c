"""Every metric key a run log holds, spelled once: the selectors, the trainer glue, the simulator, the toy testbed and
``analysis/`` all name a metric through this table (a test refuses a metric-key string literal anywhere else).

The table lives at the bottom of the module map, in the core, because the core computes most of these figures and may
import nothing above itself; it imports only the standard library's ``re``, so any module may import it. The core takes
its names from here; everything above it takes them from :mod:`bots_verl.runlog`, which re-exports the table next to
the run-log layout the keys belong to.

Three kinds of entries:

- ``*_STAT``: a name under ``bots/``, as a selector's ``stats()`` returns it (the core does not know how its figures
  are logged) or as the trainer adds it for the step (``rollouts``, ``select_ms``, ...). The run-log key is
  :func:`bots_key` of it, the one place the ``bots/`` prefix is added.
- ``*_EVIDENCE``: a figure an implicit-evidence plug-in's ``stats()`` returns; the selector reports it as the
  statistic :func:`implicit_stat` of it (``implicit/<name>``), so it is logged as ``bots/implicit/<name>``.
- ``*_METRIC``: a full run-log key, prefix included: the ``bots/`` keys that readers read by name, verl's
  ``timing_s/step``, the simulator's ``sim/...`` and the toy testbed's evaluations. Families with a variable part
  come with a helper (:func:`val_accuracy_key`, :func:`timing_key`) and, where it is read back, a pattern.
"""

from __future__ import annotations

import re

__all__ = [
    "ACC_PATTERN",
    "BOTS_PREFIX",
    "bots_key",
    "implicit_stat",
    "IMPLICIT_PREFIX",
    "timing_key",
    "toy_heldout_key",
    "toy_pool_key",
    "val_accuracy_key",
    "ALL_RIGHT_METRIC",
    "ALL_RIGHT_STAT",
    "ALL_WRONG_METRIC",
    "ALL_WRONG_STAT",
    "AUC_METRIC",
    "AUC_STAT",
    "BIAS_METRIC",
    "BIAS_STAT",
    "CAPABILITY_MU_EVIDENCE",
    "CAPABILITY_MU_RAW_EVIDENCE",
    "DEGENERATE_BATCHES_EVIDENCE",
    "DEGENERATE_FIRST_METRIC",
    "DEGENERATE_FIRST_STAT",
    "DEGENERATE_REVISIT_METRIC",
    "DEGENERATE_REVISIT_STAT",
    "DISPATCHED_STAT",
    "DPS_CANDIDATES_STAT",
    "DPS_PARTIAL_RATIO_STAT",
    "DPS_PREDICT_ACCURACY_STAT",
    "DPS_SELECTED_P_PARTIAL_STAT",
    "DPS_TOUCHED_STAT",
    "ESS_AVG_STAT",
    "ESS_MAX_STAT",
    "ESS_MIN_STAT",
    "ETR_METRIC",
    "ETR_STAT",
    "EVER_SELECTED_METRIC",
    "EVER_SELECTED_STAT",
    "EVICTED_ROLLOUTS_STAT",
    "FIRST_VISIT_METRIC",
    "FIRST_VISIT_STAT",
    "GRESO_EASY_RATIO_STAT",
    "GRESO_EASY_STREAK_STAT",
    "GRESO_FILLED_STAT",
    "GRESO_HARD_RATIO_STAT",
    "GRESO_HARD_STREAK_STAT",
    "GRESO_P_EASY_STAT",
    "GRESO_P_HARD_STAT",
    "GRESO_SKIPPED_STAT",
    "IMPLICIT_MAE_METRIC",
    "IMPLICIT_MAE_STAT",
    "INFLIGHT_FALLBACKS_STAT",
    "INFLIGHT_GROUPS_STAT",
    "LAG_MAX_STAT",
    "LAG_MEAN_STAT",
    "LEVEL_EVIDENCE",
    "LEVEL_RAW_EVIDENCE",
    "NEAR_TARGET_STAT",
    "OBSERVED_P_METRIC",
    "OBSERVED_P_STAT",
    "ORACLE_GAP_MAX_METRIC",
    "ORACLE_GAP_MAX_STAT",
    "ORACLE_POOL_PASS_STAT",
    "ORACLE_SELECTED_PASS_METRIC",
    "ORACLE_SELECTED_PASS_STAT",
    "ORACLE_TRUTH_MS_STAT",
    "ORACLE_TRUTH_VERSION_STAT",
    "PADDING_ROWS_STAT",
    "PEARSON_METRIC",
    "PEARSON_STAT",
    "POSTERIOR_ESS_METRIC",
    "POSTERIOR_ESS_STAT",
    "POSTERIOR_MEAN_MAE_METRIC",
    "POSTERIOR_MEAN_MAE_STAT",
    "POSTERIOR_MEAN_METRIC",
    "POSTERIOR_MEAN_STAT",
    "POSTERIOR_MEAN_STD_STAT",
    "POSTERIOR_ROLLOUTS_TOTAL_STAT",
    "READ_MS_METRIC",
    "READ_MS_STAT",
    "REPEAT_DISPATCHES_STAT",
    "ROLLOUTS_METRIC",
    "ROLLOUTS_STAT",
    "SAMPLED_P_METRIC",
    "SAMPLED_P_STAT",
    "SELECT_MS_METRIC",
    "SELECT_MS_STAT",
    "SELECT_ROUNDTRIP_MS_METRIC",
    "SELECT_ROUNDTRIP_MS_STAT",
    "SIM_BATCH_TRUE_P_METRIC",
    "SIM_DAPO_ROUNDS_METRIC",
    "SIM_GROUP_SIZE_MAX_METRIC",
    "SIM_GROUP_SIZE_MIN_METRIC",
    "SIM_TRAINED_GROUPS_METRIC",
    "SIM_TRAIN_SIGNAL_METRIC",
    "SIM_TRUE_P_METRIC",
    "STALE_DISPATCHES_STAT",
    "STEPS_STAT",
    "STEP_TIME_METRIC",
    "SUCCESS_METRIC",
    "SUCCESS_STAT",
    "COVERED_TASKS_EVIDENCE",
    "TOY_CANONICAL_PART",
    "TOY_ESTIMATE_PART",
    "TOY_ESTIMATE_SE_PART",
    "TOY_EXACT_METRIC",
    "TOY_GREEDY_METRIC",
    "TOY_NONCANONICAL_PART",
    "TOY_POOL_METRIC",
    "UPDATE_MS_METRIC",
    "UPDATE_MS_STAT",
    "UPDATE_ROUNDTRIP_MS_METRIC",
    "UPDATE_ROUNDTRIP_MS_STAT",
]

#: the namespace of the selector statistics and step figures in verl's tracking
BOTS_PREFIX = "bots/"


def bots_key(name: str) -> str:
    """The run-log key of a selector statistic or step figure: ``bots/<name>``.

    Args:
        name: a ``*_STAT`` of this table (or a name a custom selector's ``stats()`` returns).
    """
    return BOTS_PREFIX + name


#: the family of the implicit-evidence statistics among a BOTS selector's
IMPLICIT_PREFIX = "implicit/"


def implicit_stat(name: str) -> str:
    """The selector statistic of an implicit-evidence plug-in's figure (a ``*_EVIDENCE``): ``implicit/<name>``."""
    return IMPLICIT_PREFIX + name


def val_accuracy_key(data_source: str, n: int) -> str:
    """verl's held-out accuracy of ``data_source``, the mean over ``n`` samples per prompt (``val-core/.../mean@n``)."""
    return f"val-core/{data_source}/acc/mean@{n}"


#: reads a :func:`val_accuracy_key` back: groups ``source`` and ``n``
ACC_PATTERN = re.compile(r"^val-core/(?P<source>.+)/acc/mean@(?P<n>\d+)$")


def timing_key(phase: str) -> str:
    """verl's wall-clock seconds of one phase of the step (``timing_s/<phase>``; real runs only)."""
    return f"timing_s/{phase}"


# ------------------------------------------------------------------------------------- selector statistics (stats())
# every selector (bots_verl.core.selector_base)
STEPS_STAT = "steps"
#: tasks selected at least once so far
EVER_SELECTED_STAT = "tasks_ever_selected"
#: the effective task ratio: the share of the trained groups that are mixed (neither all right nor all wrong)
ETR_STAT = "batch/effective_task_ratio"
#: successes over rollouts of the step's trained groups
SUCCESS_STAT = "batch/success_rate"
# the batch composition (bots_verl.core.selection_metrics.batch_composition): all-wrong and all-right groups, first
# visits, and the degenerate share among first visits and among revisits
ALL_WRONG_STAT = "batch/all_wrong_frac"
ALL_RIGHT_STAT = "batch/all_right_frac"
FIRST_VISIT_STAT = "batch/first_visit_frac"
DEGENERATE_FIRST_STAT = "batch/degenerate_first_frac"
DEGENERATE_REVISIT_STAT = "batch/degenerate_revisit_frac"
# the BOTS selectors (bots_verl.core.paper.bots_selectors): the interpolation plug-in's quality against the trained
# batch's pass rates; the selected tasks' mean Thompson-sampled p, their observed pass rate and the gap; the posterior
# the batch was chosen on against what it showed; the pool's posterior
PEARSON_STAT = "estimator/pearson"
AUC_STAT = "estimator/auc"
SAMPLED_P_STAT = "selection/sampled_p_mean"
OBSERVED_P_STAT = "selection/observed_p_mean"
BIAS_STAT = "selection/sampled_p_bias"
POSTERIOR_MEAN_MAE_STAT = "selection/posterior_mean_mae"
POSTERIOR_ESS_STAT = "selection/posterior_ess"
POSTERIOR_MEAN_STAT = "posterior/mean_avg"
POSTERIOR_MEAN_STD_STAT = "posterior/mean_std"
NEAR_TARGET_STAT = "posterior/near_target_frac"
ESS_AVG_STAT = "posterior/ess_avg"
ESS_MIN_STAT = "posterior/ess_min"
ESS_MAX_STAT = "posterior/ess_max"
#: the implicit prediction's error on the trained batch
IMPLICIT_MAE_STAT = implicit_stat("batch_mae")
# the implicit-evidence plug-ins' own figures (their stats(), logged by the selector under implicit/): interpolation
# (paper) and neighbours (ours)
CAPABILITY_MU_EVIDENCE = "capability_mu"
CAPABILITY_MU_RAW_EVIDENCE = "capability_mu_raw"
DEGENERATE_BATCHES_EVIDENCE = "degenerate_batches"
LEVEL_EVIDENCE = "level"
LEVEL_RAW_EVIDENCE = "level_raw"
COVERED_TASKS_EVIDENCE = "tasks_with_evidence"
# the pass-rate oracle (bots_verl.core.ours.pass_rate_oracle)
ORACLE_TRUTH_VERSION_STAT = "oracle/truth_version"
ORACLE_TRUTH_MS_STAT = "oracle/truth_ms"
ORACLE_POOL_PASS_STAT = "oracle/pool_pass_rate"
ORACLE_SELECTED_PASS_STAT = "oracle/selected_pass_rate"
ORACLE_GAP_MAX_STAT = "oracle/selected_gap_max"
# DPS (bots_verl.core.peers.dps)
DPS_SELECTED_P_PARTIAL_STAT = "dps/selected_p_partial"
DPS_CANDIDATES_STAT = "dps/candidates"
DPS_PARTIAL_RATIO_STAT = "dps/partial_ratio"
DPS_PREDICT_ACCURACY_STAT = "dps/predict_accuracy"
DPS_TOUCHED_STAT = "dps/touched_frac"
# GRESO (bots_verl.core.peers.greso)
GRESO_SKIPPED_STAT = "greso/skipped_frac"
GRESO_FILLED_STAT = "greso/filled"
GRESO_EASY_RATIO_STAT = "greso/easy_ratio"
GRESO_HARD_RATIO_STAT = "greso/hard_ratio"
GRESO_P_EASY_STAT = "greso/p_easy"
GRESO_P_HARD_STAT = "greso/p_hard"
GRESO_EASY_STREAK_STAT = "greso/easy_streak_tasks"
GRESO_HARD_STREAK_STAT = "greso/hard_streak_tasks"

# ------------------------------------------------------------------------------ step figures the trainer adds (bots/)
#: rollouts spent this step
ROLLOUTS_STAT = "rollouts"
#: rollouts the posterior has received so far
POSTERIOR_ROLLOUTS_TOTAL_STAT = "posterior_rollouts_total"
#: milliseconds the selector's ``select`` and ``update`` took this step, in the selector's process
SELECT_MS_STAT = "select_ms"
UPDATE_MS_STAT = "update_ms"
#: what the trainer waited for the same, Ray round trip included, and for reading the step's outcomes
SELECT_ROUNDTRIP_MS_STAT = "select_roundtrip_ms"
UPDATE_ROUNDTRIP_MS_STAT = "update_roundtrip_ms"
READ_MS_STAT = "read_ms"
#: rollouts of groups verl evicted before training, read as evidence; padding rows of the batch
EVICTED_ROLLOUTS_STAT = "evicted_rollouts"
PADDING_ROWS_STAT = "padding_rows"
# the sampler's dispatch figures (bots_verl.integration.transport.sampler.end_step); the in-flight ones only in the
# asynchronous modes
DISPATCHED_STAT = "dispatched"
STALE_DISPATCHES_STAT = "stale_dispatches"
REPEAT_DISPATCHES_STAT = "repeat_dispatches"
INFLIGHT_GROUPS_STAT = "inflight_groups"
INFLIGHT_FALLBACKS_STAT = "inflight_fallbacks"
#: the asynchronous modes: the mean and largest policy lag of the step's evidence (in policy versions)
LAG_MEAN_STAT = "lag_mean"
LAG_MAX_STAT = "lag_max"

# ------------------------------------------------------------------------------- full keys (what the readers read)
ETR_METRIC = bots_key(ETR_STAT)
SUCCESS_METRIC = bots_key(SUCCESS_STAT)
ALL_WRONG_METRIC = bots_key(ALL_WRONG_STAT)
ALL_RIGHT_METRIC = bots_key(ALL_RIGHT_STAT)
FIRST_VISIT_METRIC = bots_key(FIRST_VISIT_STAT)
DEGENERATE_FIRST_METRIC = bots_key(DEGENERATE_FIRST_STAT)
DEGENERATE_REVISIT_METRIC = bots_key(DEGENERATE_REVISIT_STAT)
EVER_SELECTED_METRIC = bots_key(EVER_SELECTED_STAT)
POSTERIOR_MEAN_METRIC = bots_key(POSTERIOR_MEAN_STAT)
PEARSON_METRIC = bots_key(PEARSON_STAT)
AUC_METRIC = bots_key(AUC_STAT)
SAMPLED_P_METRIC = bots_key(SAMPLED_P_STAT)
OBSERVED_P_METRIC = bots_key(OBSERVED_P_STAT)
BIAS_METRIC = bots_key(BIAS_STAT)
POSTERIOR_MEAN_MAE_METRIC = bots_key(POSTERIOR_MEAN_MAE_STAT)
POSTERIOR_ESS_METRIC = bots_key(POSTERIOR_ESS_STAT)
IMPLICIT_MAE_METRIC = bots_key(IMPLICIT_MAE_STAT)
ORACLE_SELECTED_PASS_METRIC = bots_key(ORACLE_SELECTED_PASS_STAT)
ORACLE_GAP_MAX_METRIC = bots_key(ORACLE_GAP_MAX_STAT)
ROLLOUTS_METRIC = bots_key(ROLLOUTS_STAT)
SELECT_MS_METRIC = bots_key(SELECT_MS_STAT)
UPDATE_MS_METRIC = bots_key(UPDATE_MS_STAT)
SELECT_ROUNDTRIP_MS_METRIC = bots_key(SELECT_ROUNDTRIP_MS_STAT)
UPDATE_ROUNDTRIP_MS_METRIC = bots_key(UPDATE_ROUNDTRIP_MS_STAT)
READ_MS_METRIC = bots_key(READ_MS_STAT)
#: wall-clock seconds of the step (verl's; real runs only)
STEP_TIME_METRIC = timing_key("step")
# the simulator (bots_verl.sim.loop): the true success probability of the last select()'s batch and of every task
# generated this step; the training signal, the trained groups, the group sizes and DAPO's refill rounds
SIM_TRUE_P_METRIC = "sim/true_p_mean"
SIM_BATCH_TRUE_P_METRIC = "sim/batch_true_p_mean"
SIM_TRAIN_SIGNAL_METRIC = "sim/train_signal"
SIM_TRAINED_GROUPS_METRIC = "sim/trained_groups"
SIM_GROUP_SIZE_MAX_METRIC = "sim/group_size_max"
SIM_GROUP_SIZE_MIN_METRIC = "sim/group_size_min"
SIM_DAPO_ROUNDS_METRIC = "sim/dapo_rounds"
#: the toy testbed's evaluations (bots_verl.toy.evaluate): the expected held-out accuracy of one temperature-1 sample
#: per prompt (verl's ``mean@1`` without its noise), held-out accuracy of greedy decoding, and the expected accuracy
#: over the whole training pool (what GRPO optimises; selection decides where it is spent)
TOY_EXACT_METRIC = "val-core/toy__arith/acc/exact"
TOY_GREEDY_METRIC = "val-core/toy__arith/acc/greedy"
TOY_POOL_METRIC = "train-pool/toy__arith/acc/exact"
#: the toy code and logic families' held-out accuracy (bots_verl.toy.heldout): their rewards accept more than the
#: canonical answer, so it is estimated as the canonical answer's exact likelihood (``canonical``) plus the share of
#: temperature-1 samples that pass the domain reward and are not the canonical answer (``noncanonical``); ``estimate``
#: is their sum (unbiased for the expected accuracy of one sample per prompt), ``estimate_se`` its standard error over
#: the samples (the prompts fixed, as the exact figure's); on the pool only ``canonical`` is logged (a lower bound)
TOY_ESTIMATE_PART = "estimate"
TOY_CANONICAL_PART = "canonical"
TOY_NONCANONICAL_PART = "noncanonical"
TOY_ESTIMATE_SE_PART = "estimate_se"


def toy_heldout_key(data_source: str, part: str) -> str:
    """A toy code or logic build's held-out figure: ``val-core/<data_source>/acc/<part>`` (a ``TOY_*_PART``)."""
    return f"val-core/{data_source}/acc/{part}"


def toy_pool_key(data_source: str, part: str) -> str:
    """A toy code or logic build's training-pool figure: ``train-pool/<data_source>/acc/<part>``."""
    return f"train-pool/{data_source}/acc/{part}"
