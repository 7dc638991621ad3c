"""The driver's checks of the task pool's inputs, before Ray: the train files' columns and domain, the reference values
and the task embeddings against the pool (issue 36).

Files that are not local (a cluster path, ``hdfs://``) are left to the trainer, which checks the pool verl built
(``BOTSTrainer``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from omegaconf import DictConfig

from bots_verl.config.settings import BOTSSettings
from bots_verl.config.verl_checks import local_path_exists, train_files
from bots_verl.integration.evidence.embeddings import (
    check_reference_values,
    load_task_embeddings,
    pool_task_ids,
)
from bots_verl.integration.evidence.task_index import (
    GURU_DOMAINS,
    TaskIndex,
    check_parquet_columns,
    check_parquet_domain,
    read_reference_columns,
)

logger = logging.getLogger(__name__)

__all__ = ["check_pool_inputs", "check_train_files"]


def check_train_files(config: DictConfig, settings: BOTSSettings) -> None:
    """Each local train parquet holds the task-id and reference columns (and the run's Guru domain), then the pool's
    inputs (:func:`check_pool_inputs`); a train file that is not here is only warned about.

    Raises:
        ValueError: naming the file and the problem.
    """
    bots = settings.section
    for file in train_files(config):
        if not local_path_exists(file):
            logger.warning("data.train_files entry %s does not exist here; its columns are not checked", file)
            continue
        if file.endswith(".parquet"):
            check_parquet_columns(file, [bots.task_id_path[0], *bots.reference_columns])
            if bots.run_log.domain in GURU_DOMAINS:
                check_parquet_domain(file, bots.run_log.domain)
    check_pool_inputs(train_files(config), settings)


def check_pool_inputs(files: Sequence[str], settings: BOTSSettings) -> dict[str, int] | None:
    """The reference values and the task embeddings against the pool in the train files, before Ray (issue 36).

    Refused here, never a silent fall back to the flat prior: a reference column that is NaN on every task, an
    embedding file whose task ids do not match the train files (missing, extra, repeated), whose rows differ in
    length or hold non-finite values, and a similarity graph that would not fit in memory. Files that are not local
    are left to the trainer, which checks the pool verl built.

    Returns:
        ``{"tasks": N, "labelled": L}`` (tasks with every reference column finite) when reference columns are set and
        the files are local, else None.

    Raises:
        ValueError: naming the file and the problem.
    """
    bots = settings.section
    if not (bots.reference_columns or bots.task_embeddings):
        return None
    files = list(files)
    if not files or not all(f.endswith(".parquet") and local_path_exists(f) for f in files):
        logger.info("the train files are not all local parquet files: the trainer checks the pool's inputs")
        return None
    ids = pool_task_ids(files, bots.task_id_path)
    coverage = None
    if bots.reference_columns:
        index = TaskIndex(ids, bots.task_id_field)
        reference = read_reference_columns(files, bots.reference_columns, bots.task_id_path, index)
        coverage = {"tasks": len(ids), "labelled": check_reference_values(reference, bots.reference_columns, files)}
        if coverage["labelled"] < len(ids):
            logger.info(
                "reference columns labelled on %d of %d tasks (%.1f%%); the other %d get no reference generations",
                coverage["labelled"],
                len(ids),
                100.0 * coverage["labelled"] / len(ids),
                len(ids) - coverage["labelled"],
            )
    if bots.task_embeddings:
        emb = load_task_embeddings(bots.task_embeddings, ids)
        settings.selector.check_graph_fits(len(ids), emb.vectors.shape[1])
    return coverage
