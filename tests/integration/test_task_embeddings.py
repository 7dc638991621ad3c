"""The task embedding file format and its alignment to the pool: each mismatch refused with a clear error (issue 36)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_verl.core.task_graph import check_graph_fits
from bots_verl.integration.evidence.embeddings import (
    EmbeddingFileError,
    check_reference_values,
    embeddings_sha256,
    load_task_embeddings,
    read_embedding_file,
    write_embedding_file,
)

IDS = [10, 11, 12, 13]


def _vectors(n: int = 4, d: int = 3) -> np.ndarray:
    return np.arange(n * d, dtype=np.float32).reshape(n, d) / 10


def test_written_file_aligns_to_the_pool_order(tmp_path):
    path = write_embedding_file(tmp_path / "e.parquet", IDS, _vectors(), {"method": "text"})
    emb = load_task_embeddings(path, [13, 10, 12, 11])
    assert emb.task_ids == [13, 10, 12, 11]
    np.testing.assert_array_equal(emb.vectors, _vectors()[[3, 0, 2, 1]])
    assert emb.meta["method"] == "text" and emb.meta["dims"] == 3
    assert emb.sha256 == embeddings_sha256(_vectors()[[3, 0, 2, 1]]) != embeddings_sha256(_vectors())


def test_rows_of_tasks_verl_dropped_are_left_out_not_refused(tmp_path):
    path = write_embedding_file(tmp_path / "e.parquet", IDS, _vectors(), {})
    emb = load_task_embeddings(path, [11, 12], file_task_ids=IDS)
    np.testing.assert_array_equal(emb.vectors, _vectors()[[1, 2]])


def _raw(tmp_path: Path, ids, rows, kind=None) -> Path:
    path = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"task_id": ids, "embedding": pa.array(rows, type=kind)}), path)
    return path


@pytest.mark.parametrize(
    ("ids", "rows", "pool", "message"),
    [
        ([10, 11, 12], [[0.0], [1.0], [2.0]], IDS, "1 of the pool's 4 tasks have no embedding, e.g. [13]"),
        ([10, 11, 12, 13, 99], [[0.0]] * 5, IDS, "1 rows are for tasks that are not in the training data, e.g. [99]"),
        ([10, 11, 11, 13], [[0.0]] * 4, IDS, "task_id 11 appears more than once"),
        ([10, 11, 12, 13], [[0.0, 1.0], [1.0], [2.0, 0.0], [3.0, 0.0]], IDS, "rows have different dimensions"),
        ([10, 11, 12, 13], [[0.0], [float("nan")], [1.0], [2.0]], IDS, "1 rows hold NaN or infinite values"),
        ([10, 11, 12, 13], [[0.0], [float("inf")], [1.0], [2.0]], IDS, "NaN or infinite"),
        ([10, 11, 12, 13], [[0.0], None, [1.0], [2.0]], IDS, "row 1 has no embedding"),
        (["10", "11", "12", "13"], [[0.0]] * 4, IDS, "int and str ids never match"),
    ],
)
def test_mismatches_are_refused_naming_the_file(tmp_path, ids, rows, pool, message):
    path = _raw(tmp_path, ids, rows)
    with pytest.raises(EmbeddingFileError, match="raw.parquet") as err:
        load_task_embeddings(path, pool)
    assert message in str(err.value)


def test_unreadable_files_are_refused(tmp_path):
    with pytest.raises(EmbeddingFileError, match="not found"):
        read_embedding_file(tmp_path / "missing.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(EmbeddingFileError, match="not a readable parquet"):
        read_embedding_file(tmp_path / "junk.parquet")
    pq.write_table(pa.table({"task_id": [1], "vector": [[1.0]]}), tmp_path / "cols.parquet")
    with pytest.raises(EmbeddingFileError, match="no 'embedding' column"):
        read_embedding_file(tmp_path / "cols.parquet")


def test_writer_refuses_what_the_reader_would(tmp_path):
    with pytest.raises(EmbeddingFileError, match="non-finite"):
        write_embedding_file(tmp_path / "e.parquet", IDS, np.full((4, 2), np.nan), {})
    with pytest.raises(EmbeddingFileError, match="repeat"):
        write_embedding_file(tmp_path / "e.parquet", [1, 1, 2, 3], _vectors(), {})
    with pytest.raises(EmbeddingFileError, match="shape"):
        write_embedding_file(tmp_path / "e.parquet", IDS, _vectors(3), {})
    assert not (tmp_path / "e.parquet").exists()


def test_graph_memory_and_all_nan_references_are_refused():
    assert check_graph_fits(100_000, 256, 16, available=8 * 2**30) < 2**30
    with pytest.raises(ValueError, match="needs about .* GiB, more than the 8.00 GiB available"):
        check_graph_fits(10_000_000, 1024, 64, available=8 * 2**30)
    reference = np.array([[0.2, 0.4], [np.nan, np.nan], [0.1, 0.9]])
    assert check_reference_values(reference, ["weak", "strong"], "train.parquet") == 2
    reference[:, 1] = np.nan
    with pytest.raises(ValueError, match="'strong' of train.parquet is NaN on all 3 tasks"):
        check_reference_values(reference, ["weak", "strong"], "train.parquet")
