"""``bots.task_embeddings`` and partial reference columns (issue 36): every bad input refused by the driver before
Ray starts, never a silent fall back to the flat prior; the run fingerprint follows the embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_module

from bots_verl.config.bots_config import read_bots_config
from bots_verl.config.settings import resolve_settings
from bots_verl.integration.evidence.embeddings import write_embedding_file
from bots_verl.integration.evidence.pool_checks import check_pool_inputs
from bots_verl.integration.safety.fingerprint import fingerprint_changes, run_fingerprint

N = 40


def _config(*overrides: str):
    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return compose(config_name="bots_trainer", overrides=list(overrides))


def _bots(*overrides: str):
    config = _config("bots.task_id_field=task_id", *overrides)
    return resolve_settings(read_bots_config(config))


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    weak = np.linspace(0.0, 0.8, N)
    labelled = np.arange(N) % 10 == 0
    table = pa.table(
        {
            "task_id": pa.array(range(N), pa.int64()),
            "prompt": pa.array([[{"role": "user", "content": f"task {i}"}] for i in range(N)]),
            "weak": weak,
            "strong": weak + 0.2,
            "weak_ref10": np.where(labelled, weak, np.nan),
            "strong_ref10": np.where(labelled, weak + 0.2, np.nan),
            "none": np.full(N, np.nan),
        }
    )
    pq.write_table(table, tmp_path / "train.parquet")
    return tmp_path / "train.parquet"


def _embeddings(path: Path, ids=range(N), d: int = 8, seed: int = 0) -> Path:
    vectors = np.random.default_rng(seed).normal(size=(len(list(ids)), d))
    return write_embedding_file(path, list(ids), vectors, {"method": "test"})


def test_the_field_and_its_comment_are_in_the_yaml():
    text = (Path(__file__).parents[2] / "bots_verl/config/bots_trainer.yaml").read_text()
    above = text.split("\n  task_embeddings:")[0].rstrip().splitlines()[-1]
    assert above.strip().startswith("#") and "empty: none" in above
    assert read_bots_config(_config()).task_embeddings == ""


def test_a_selector_that_needs_embeddings_without_them_is_refused():
    with pytest.raises(ValueError, match="set bots.task_embeddings"):
        _bots("bots.selector=bots_noref")


def test_partial_references_with_embeddings_pass_and_report_their_coverage(pool, tmp_path):
    emb = _embeddings(tmp_path / "emb.parquet")
    bots = _bots(
        "bots.selector=bots_partial_ref",
        "bots.reference_columns=[weak_ref10,strong_ref10]",
        f"bots.task_embeddings={emb}",
    )
    assert check_pool_inputs([str(pool)], bots) == {"tasks": N, "labelled": N // 10}
    bots = _bots("bots.selector=bots_noref", f"bots.task_embeddings={emb}")
    assert check_pool_inputs([str(pool)], bots) is None


def test_an_all_nan_reference_column_is_refused(pool, tmp_path):
    emb = _embeddings(tmp_path / "emb.parquet")
    bots = _bots("bots.selector=bots_partial_ref", "bots.reference_columns=[weak,none]", f"bots.task_embeddings={emb}")
    with pytest.raises(ValueError, match="'none' of .* is NaN on all 40 tasks"):
        check_pool_inputs([str(pool)], bots)


@pytest.mark.parametrize(
    ("ids", "message"),
    [(range(N - 1), "1 of the pool's 40 tasks have no embedding"), (range(N + 2), "2 rows are for tasks that are not")],
)
def test_an_embedding_file_that_does_not_match_the_pool_is_refused(pool, tmp_path, ids, message):
    emb = _embeddings(tmp_path / "emb.parquet", ids)
    bots = _bots("bots.selector=bots_noref", f"bots.task_embeddings={emb}")
    with pytest.raises(ValueError, match=message):
        check_pool_inputs([str(pool)], bots)


def test_a_graph_that_does_not_fit_in_memory_is_refused(pool, tmp_path, monkeypatch):
    import bots_verl.core.memory as memory

    emb = _embeddings(tmp_path / "emb.parquet")
    bots = _bots("bots.selector=bots_noref", f"bots.task_embeddings={emb}")
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 1000)
    with pytest.raises(ValueError, match="task-similarity graph of 40 tasks x 8 dims .* more than the"):
        check_pool_inputs([str(pool)], bots)


def test_the_fingerprint_changes_with_the_embeddings():
    def fingerprint(digest):
        return run_fingerprint(
            task_ids=list(range(N)),
            prompts_sha256="p",
            reference_columns=[],
            reference=None,
            selector="bots_noref",
            hparams={"lam": 0.1},
            success_rule="auto",
            success_threshold=0.0,
            task_embeddings_sha256=digest,
        )

    same = fingerprint("a" * 64)
    assert fingerprint_changes(same, fingerprint("a" * 64)) == []
    (change,) = fingerprint_changes(same, fingerprint("b" * 64))
    assert change.part == "task_embeddings" and change.accept == "task_embeddings"
    (dropped,) = fingerprint_changes(same, fingerprint(None))
    assert dropped.part == "task_embeddings"
    # runs without embeddings keep the fingerprint they had before issue 36
    assert "task_embeddings" not in fingerprint(None)
