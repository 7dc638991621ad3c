"""``reference_eval embed``: the text and policy producers on GURU-shaped prompts and the tiny model (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_verl.data.guru_fixture import leetcode_file, math_file, zebra_file
from bots_verl.integration.evidence.embeddings import METADATA_KEY, read_embedding_file
from reference_eval.cli import main
from reference_eval.embed import text_embeddings


def _with_task_id(src: Path, dst: Path) -> Path:
    """A GURU fixture file with a top-level id column ``uid`` from its ``extra_info`` id (code files keep their own
    ``task_id``, LeetCode's)."""
    table = pq.read_table(src)
    info = table.column("extra_info").to_pylist()
    key = next(k for k in ("index", "id", "idx") if info[0] and k in info[0])
    ids = [f"{src.stem}:{row[key]}" for row in info]
    pq.write_table(table.append_column("uid", pa.array(ids)), dst)
    return dst


@pytest.fixture(scope="module")
def guru_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("guru")
    raw = {
        "math": math_file(root / "raw" / "math.parquet", n=12),
        "code": leetcode_file(root / "raw" / "code.parquet", n=3),
        "logic": zebra_file(root / "raw" / "logic.parquet", n=3),
    }
    return {name: _with_task_id(path, root / f"{name}.parquet") for name, path in raw.items()}


@pytest.mark.parametrize("domain", ["math", "code", "logic"])
def test_text_method_runs_unchanged_on_every_guru_domain(guru_files, tmp_path, domain):
    out = tmp_path / "emb.parquet"
    args = ["embed", "--method", "text", "--data", str(guru_files[domain]), "--out", str(out), "--id-column", "uid"]
    assert main([*args, "--dims", "32"]) == 0
    emb = read_embedding_file(out)
    ids = pq.read_table(guru_files[domain], columns=["uid"]).column("uid").to_pylist()
    assert emb.task_ids == ids
    assert emb.vectors.shape == (len(ids), 32) and emb.vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb.vectors, axis=1), 1.0, rtol=1e-5)
    meta = json.loads(pq.read_schema(out).metadata[METADATA_KEY])
    assert meta["method"] == "text" and meta["dims"] == 32 and meta["tasks"] == len(ids)


def test_text_method_is_seeded_and_near_texts_are_nearer():
    texts = [
        "What is the derivative of x^2 + 3x?",
        "What is the derivative of x^2 + 5x?",
        "Write a Python function that reverses a linked list.",
    ]
    a, b = text_embeddings(texts, dims=64, seed=1), text_embeddings(texts, dims=64, seed=1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, text_embeddings(texts, dims=64, seed=2))
    sim = a @ a.T
    assert sim[0, 1] > 0.5 > sim[0, 2]


def test_policy_method_with_the_tiny_model(tiny_model, dataset, tmp_path):
    out = tmp_path / "emb.parquet"
    args = ["embed", "--method", "policy", "--model", str(tiny_model), "--data", str(dataset), "--out", str(out)]
    assert main([*args, "--batch-size", "3", "--device", "cpu", "--no-progress"]) == 0
    emb = read_embedding_file(out)
    assert emb.vectors.shape == (pq.read_metadata(dataset).num_rows, 16)  # the tiny model's hidden size
    assert emb.meta["method"] == "policy" and emb.meta["model"] == str(tiny_model)
    # batching (right padding) does not change a prompt's vector
    again = tmp_path / "emb1.parquet"
    assert main([*args[:-1], str(again), "--batch-size", "1", "--device", "cpu", "--no-progress"]) == 0
    np.testing.assert_allclose(read_embedding_file(again).vectors, emb.vectors, atol=1e-5)
    # prompts that differ get different vectors
    assert len({row.tobytes() for row in emb.vectors}) > 1


def test_embed_refuses_bad_arguments_before_any_work(dataset, tmp_path, caplog):
    out = tmp_path / "emb.parquet"
    cases = [
        (["--method", "policy", "--data", str(dataset)], "needs --model"),
        (["--method", "text", "--data", str(tmp_path / "nope.parquet")], "not found"),
    ]
    for args, message in cases:
        caplog.clear()
        assert main(["embed", *args, "--out", str(out)]) == 2
        assert message in caplog.text
        assert not out.exists()
    out.write_text("x")
    caplog.clear()
    assert main(["embed", "--method", "text", "--data", str(dataset), "--out", str(out)]) == 2
    assert "--force" in caplog.text and out.read_text() == "x"
