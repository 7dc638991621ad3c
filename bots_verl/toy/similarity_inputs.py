"""The testbed's inputs for BOTS without the full reference bill (issue 36): task embeddings and labelled subsets.

- ``embeddings.parquet``: the **policy's own hidden states at step 0** (``reference_eval embed --method policy`` on
  the build's ``models/policy``: the last hidden layer mean-pooled over the chat-templated prompt). Chosen over the
  ``text`` method on this pool because the policy's states carry what it computes for a prompt, while byte n-grams of
  ``8188-867`` mostly share digits: imputing the pool's reference columns from the 16 most similar tasks of a random
  10% gives Pearson r 0.64 (weak) / 0.65 (strong) with policy states, 0.25 / 0.26 with text (``python -m
  bots_verl.toy.similarity_inputs --compare DIR``). Nothing here is made for arithmetic: the same command embeds GURU.
- ``train_labelled.parquet``: ``train.parquet`` plus, per subset of :data:`LABELLED_SUBSETS`, the two reference
  columns restricted to the chosen tasks (``toy_weak_pass_rate_ref10``, ...; NaN elsewhere). The values are the
  build's own columns on those tasks, which are exactly what ``reference_eval collect --label-fraction`` gives: a
  prompt's samples are seeded by its task id alone. The subset is :func:`reference_eval.label.choose_subset` (by
  :data:`LABEL_BY`, seeded by the build seed), so every training seed sees the same labels.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["LABEL_BY", "LABELLED_SUBSETS", "build_similarity_inputs", "labelled_column", "main"]

#: subset name -> labelled fraction of the pool
LABELLED_SUBSETS: dict[str, float] = {"ref10": 0.10, "ref5": 0.05}
#: how the labelled tasks are chosen (``reference_eval --label-by``)
LABEL_BY = "spread"
EMBEDDINGS_FILE = "embeddings.parquet"
LABELLED_FILE = "train_labelled.parquet"


def labelled_column(column: str, subset: str) -> str:
    """The name of ``column`` restricted to ``subset``, e.g. ``toy_weak_pass_rate_ref10``."""
    return f"{column}_{subset}"


def build_similarity_inputs(
    out: Path, columns: tuple[str, ...], seed: int, reference_n: int, policy: str = "policy"
) -> dict[str, Any]:
    """Write ``embeddings.parquet`` and ``train_labelled.parquet`` in the build ``out`` (skipped when already built
    with these settings); returns their description for the manifest.

    Raises:
        ValueError: a build whose files were made with other settings (use another output directory).
    """
    import hashlib
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from bots_verl.fileio import write_json_atomic, write_table_atomic
    from reference_eval.embed import embed
    from reference_eval.label import choose_subset

    settings = {
        "embedding": {"method": "policy", "model": f"models/{policy}"},
        "subsets": dict(LABELLED_SUBSETS),
        "label_by": LABEL_BY,
        "seed": seed,
        "columns": list(columns),
    }
    meta_path = out / "similarity.json"
    emb_path, labelled_path = out / EMBEDDINGS_FILE, out / LABELLED_FILE
    train = out / "train.parquet"
    # the labelled columns copy train.parquet's reference values: a rebuilt train.parquet (a lost reference) rebuilds
    # them
    train_sha256 = hashlib.sha256(train.read_bytes()).hexdigest()
    if meta_path.is_file() and emb_path.is_file() and labelled_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta["settings"] != settings:
            raise ValueError(f"{meta_path} was built with {meta['settings']}, not {settings}; use another --out")
        if meta.get("train_sha256") == train_sha256:
            logger.info("similarity inputs: already built (%s)", meta_path)
            return meta
        logger.info("similarity inputs: %s changed since they were built; rebuilding the labelled columns", train)
    if not emb_path.is_file():
        embed(train, emb_path, "policy", model=str(out / "models" / policy), batch_size=256, progress=False)
    table = pq.read_table(train)
    ids = table.column("task_id").to_pylist()
    plans = {}
    for subset, fraction in LABELLED_SUBSETS.items():
        plan = choose_subset(ids, fraction, LABEL_BY, seed=seed, embeddings=emb_path, samples=reference_n)
        mask = np.isin(np.asarray(ids, dtype=object), np.asarray(plan.task_ids, dtype=object))
        for column in columns:
            values = table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
            table = table.append_column(labelled_column(column, subset), pa.array(np.where(mask, values, np.nan)))
        plans[subset] = plan.to_dict()
        logger.info("%s: %s", subset, plan.summary())
    write_table_atomic(table, labelled_path)
    meta = {"settings": settings, "labelled": plans, "train_sha256": train_sha256}
    write_json_atomic(meta_path, meta, sort_keys=True)
    return meta


def _compare(out: Path, fraction: float = 0.1, k: int = 16) -> None:
    """Print how well each embedding method imputes the reference columns from a random labelled fraction."""
    import json

    import pyarrow.parquet as pq

    from reference_eval.embed import policy_embeddings, prompt_text, read_prompts, text_embeddings

    # the build's own reference columns, from its manifest (importing prepare here would be an import circle)
    columns = json.loads((out / "manifest.json").read_text())["artifacts"]["reference_columns"]
    ids, prompts = read_prompts(out / "train.parquet")
    table = pq.read_table(out / "train.parquet", columns=list(columns))
    methods = {
        "text": text_embeddings([prompt_text(p) for p in prompts]),
        "policy": policy_embeddings(str(out / "models" / "policy"), prompts, batch_size=256),
    }
    labelled = np.zeros(len(ids), dtype=bool)
    labelled[np.random.default_rng(0).choice(len(ids), int(fraction * len(ids)), replace=False)] = True
    for name, vectors in methods.items():
        near = np.argsort(-(vectors @ vectors[labelled].T), axis=1)[:, :k]
        for column in columns:
            values = table.column(column).to_numpy(zero_copy_only=False)
            guess = values[labelled][near].mean(axis=1)
            r = np.corrcoef(guess[~labelled], values[~labelled])[0, 1]
            print(f"{name:6s} {column}: Pearson r {r:.3f} (k={k}, {fraction:.0%} labelled at random)")


def main(argv: list[str] | None = None) -> int:
    """``python -m bots_verl.toy.similarity_inputs --compare DIR``: the embedding comparison quoted in the docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", required=True, type=Path, help="a prepared build (runs/toy/data)")
    args = parser.parse_args(argv)
    _compare(args.compare)
    return 0


def manifest_artifacts(out: Path, columns: tuple[str, ...]) -> Mapping[str, Any]:
    """The manifest's paths for the labelled arms: the embedding file, the labelled train file, its columns."""
    return {
        "task_embeddings": str(out / EMBEDDINGS_FILE),
        "labelled_train_files": str(out / LABELLED_FILE),
        "labelled_columns": {s: [labelled_column(c, s) for c in columns] for s in LABELLED_SUBSETS},
    }


if __name__ == "__main__":
    raise SystemExit(main())
