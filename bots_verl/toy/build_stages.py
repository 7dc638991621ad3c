"""The toy build's stages (data, warm-ups, references, similarity inputs, calibration), each resumable on its own.

:func:`bots_verl.toy.prepare.prepare` runs them in order and records them in ``manifest.json``.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bots_verl.fileio import markdown_table, write_json_atomic, write_table_atomic
from bots_verl.toy.build_processes import param_proxy, reference_eval, run_processes
from bots_verl.toy.build_profiles import (
    HELDOUT_STREAM,
    POOL_STREAM,
    REFERENCE_COLUMNS,
    STRONG_COLUMN,
    WEAK_COLUMN,
    BuildProfile,
    PrepareError,
)
from bots_verl.toy.similarity_inputs import build_similarity_inputs
from bots_verl.toy.warmup import WarmupSpec

__all__ = [
    "StageTimer",
    "format_calibration",
    "read_json",
    "stage_calibration",
    "stage_data",
    "stage_references",
    "stage_similarity",
    "stage_warmups",
    "write_json",
]

logger = logging.getLogger(__name__)


def read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when there is no such file."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` to ``path`` atomically, keys sorted (what the manifest and the stages' records use)."""
    write_json_atomic(path, payload, sort_keys=True, default=str)


class StageTimer:
    """Times one stage: wall-clock, and CPU seconds of this process and its children (worker processes included:
    they are reaped when the stage ends)."""

    def __init__(self, manifest: dict[str, Any], name: str) -> None:
        self.manifest, self.name = manifest, name
        self.skipped = False  # set by a stage that found its output already built

    def __enter__(self) -> StageTimer:
        self.wall0 = time.monotonic()
        self.cpu0 = _cpu_seconds()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        stages = self.manifest.setdefault("stages", {})
        if exc_type is not None or (self.skipped and self.name in stages):
            return  # keep the timing of the run that did the work
        stages[self.name] = {
            "wall_s": round(time.monotonic() - self.wall0, 2),
            "cpu_s": round(_cpu_seconds() - self.cpu0, 2),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }


def _cpu_seconds() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def stage_data(out: Path, profile: BuildProfile, seed: int, stage: StageTimer) -> dict[str, Any]:
    """Stage 1: ``val.parquet`` and ``pool.parquet`` (skipped when both exist for the same settings)."""
    from bots_verl.toy.splits import build_split, write_split

    settings = profile.data_settings(seed)
    meta_path = out / "data.json"
    meta = read_json(meta_path)
    if meta is not None and (out / "pool.parquet").is_file() and (out / "val.parquet").is_file():
        if meta["settings"] != settings:
            raise PrepareError(f"{meta_path} was built with {meta['settings']}, not {settings}; use another --out")
        logger.info("data: already built (%d pool, %d held-out tasks)", meta["pool_tasks"], meta["heldout_tasks"])
        stage.skipped = True
        return meta
    family = profile.family
    heldout = build_split(profile.heldout_counts(), seed, HELDOUT_STREAM, family=family)
    pool = build_split(profile.pool_counts(), seed, POOL_STREAM, exclude=[p.prompt for p in heldout], family=family)
    _check_lengths(profile, heldout + pool)
    write_split(heldout, "test", out / "val.parquet", family)
    write_split(pool, "train", out / "pool.parquet", family)
    meta = {"settings": settings, "pool_tasks": len(pool), "heldout_tasks": len(heldout)}
    write_json(meta_path, meta)
    logger.info("data: %d pool tasks, %d held-out tasks", len(pool), len(heldout))
    return meta


def _check_lengths(profile: BuildProfile, problems: list) -> None:
    """Refuse a build whose prompts or answers would not fit verl's prompt length or the response budget."""
    from bots_verl.toy.families import family_of
    from bots_verl.toy.tokenizer import encode, vocab_of

    vocab, limit = vocab_of(profile.family), family_of(profile.family).max_prompt_length
    for problem in problems:
        ids, n_prompt = encode(problem.prompt, problem.answer, vocab)
        if n_prompt > limit or len(ids) - n_prompt > profile.max_tokens:
            raise PrepareError(
                f"{profile.family} task {problem.prompt!r}: {n_prompt} prompt tokens (limit {limit}) and "
                f"{len(ids) - n_prompt} answer tokens with </s> (max_tokens {profile.max_tokens}); "
                "raise the family's max_prompt_length or the profile's max_tokens"
            )


def split_prompts(path: Path) -> list[str]:
    """The prompt texts of a split's parquet file (verl's chat layout: one user message), in row order."""
    import pyarrow.parquet as pq

    return [row[0]["content"] for row in pq.read_table(path, columns=["prompt"]).column("prompt").to_pylist()]


def stage_warmups(out: Path, jobs_wanted: Mapping[str, WarmupSpec], jobs: int, stage: StageTimer) -> dict[str, Any]:
    """Stage 2: the warmed-up models under ``models/``, ``jobs`` at a time (a finished one is kept)."""
    from bots_verl.toy.warmup import WarmupTargetError, is_done, read_result

    pool = split_prompts(out / "pool.parquet")  # the probe of a warm-up that stops at a pass rate (WarmupSpec.stop_at)
    exclude = split_prompts(out / "val.parquet") + pool
    results: dict[str, Any] = {}
    todo = {}
    for name, spec in jobs_wanted.items():
        path = out / "models" / name
        try:
            done = is_done(path, spec)
        except ValueError as err:
            raise PrepareError(str(err)) from err
        if done:
            results[name] = read_result(path)
        else:
            todo[name] = spec
    stage.skipped = not todo
    if todo and jobs == 1:
        from bots_verl.toy.warmup import train_warmup

        for name, spec in todo.items():
            try:
                results[name] = train_warmup(spec, out / "models" / name, exclude=exclude, log_every=100, probe=pool)
            except WarmupTargetError as err:
                raise PrepareError(str(err)) from err
    elif todo:
        # Longest first (a cost proxy: steps x batch x parameters), so the slowest warm-up never starts last.
        order = sorted(todo, key=lambda n: -todo[n].steps * todo[n].batch_size * param_proxy(todo[n].model))
        logger.info("warm-ups to train: %s (%d at a time)", order, jobs)
        for name in run_processes(order, jobs, lambda n: (todo[n], str(out / "models" / n), exclude, pool)):
            results[name] = read_result(out / "models" / name)
            logger.info(
                "warm-up %s done: %.0f s wall, %.0f s CPU", name, results[name]["wall_s"], results[name]["cpu_s"]
            )
    return {name: {k: r[k] for k in ("parameters", "wall_s", "cpu_s", "loss")} for name, r in results.items()}


def _collect_args(profile: BuildProfile, seed: int, role: str) -> list[str]:
    return [
        "collect",
        "--backend",
        "transformers",
        "--device",
        "cpu",
        "--data",
        "pool.parquet",
        "--model",
        f"models/{role}",
        "--out",
        f"refs/{role}.jsonl",
        "-n",
        str(profile.reference_n),
        "--temperature",
        "1.0",
        "--max-tokens",
        str(profile.max_tokens),
        "--seed",
        str(seed),
        "--batch-size",
        str(profile.reference_batch_size),
        "--no-progress",
    ]


def stage_references(out: Path, profile: BuildProfile, seed: int, jobs: int, stage: StageTimer) -> dict[str, Any]:
    """Stage 3: ``train.parquet``, the pool with the weak and the strong reference's pass-rate columns."""
    import pyarrow.parquet as pq

    train = out / "train.parquet"
    if train.is_file() and set(REFERENCE_COLUMNS) <= set(pq.read_schema(train).names):
        logger.info("references: %s already has %s", train, list(REFERENCE_COLUMNS))
        stage.skipped = True
        return read_json(out / "refs" / "merge.json") or {}
    roles = {"weak": WEAK_COLUMN, "strong": STRONG_COLUMN}
    reference_eval({role: _collect_args(profile, seed, role) for role in roles}, out, jobs)
    src = "pool.parquet"  # paths relative to the artifact directory, where reference_eval runs
    reports = {}
    for i, (role, column) in enumerate(roles.items()):
        dst = train.name if i == len(roles) - 1 else f".train.{role}.parquet"
        report = f"refs/{role}.merge.json"
        args = ["merge", "--data", src, "--results", f"refs/{role}.jsonl", "--column", column]
        args += ["--out", dst, "--force", "--report", report]
        reference_eval({f"{role}.merge": args}, out, 1)
        merged = json.loads((out / report).read_text(encoding="utf-8"))
        if merged["missing"]:
            raise PrepareError(f"{column}: {merged['missing']} pool tasks have no reference result ({out / report})")
        reports[column] = {k: merged[k] for k in ("rows", "with_results", "missing", "attempts")}
        if src != "pool.parquet":
            (out / src).unlink()
        src = dst
    write_json(out / "refs" / "merge.json", reports)
    return reports


def stage_similarity(out: Path, profile: BuildProfile, seed: int, stage: StageTimer) -> dict[str, Any]:
    """Issue 36's inputs: the policy's task embeddings and the labelled-subset reference columns
    (:mod:`bots_verl.toy.similarity_inputs`)."""
    if (out / "similarity.json").is_file():
        stage.skipped = True
    try:
        meta = build_similarity_inputs(out, REFERENCE_COLUMNS, seed, profile.reference_n)
    except ValueError as err:
        raise PrepareError(str(err)) from err
    keep = ("labelled", "tasks", "saved_generations")
    return {subset: {k: plan[k] for k in keep} for subset, plan in meta["labelled"].items()}


def _exact(model_dir: Path, problems: list, family: str) -> tuple[np.ndarray, np.ndarray]:
    import torch

    from bots_verl.toy.likelihood import answer_stats, load_model
    from bots_verl.toy.tokenizer import vocab_of

    torch.set_num_threads(1)
    return answer_stats(load_model(model_dir), problems, vocab=vocab_of(family))


def _sampled(model_dir: Path, problems: list, family: str, max_tokens: int | None, seed: int) -> dict[str, Any]:
    import torch

    from bots_verl.toy.heldout import estimate_accuracy
    from bots_verl.toy.likelihood import load_model

    assert max_tokens is not None  # checked by stage_calibration
    torch.set_num_threads(1)
    found = estimate_accuracy(load_model(model_dir), problems, family, max_tokens=max_tokens, run_seed=seed, step=0)
    return {
        "estimate": found.estimate,
        "canonical": found.canonical,
        "noncanonical": found.noncanonical,
        "se": found.se,
        "samples": found.samples,
    }


def stage_calibration(
    out: Path,
    policy_names: list[str],
    stage: StageTimer,
    family: str = "arith",
    max_tokens: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Stage 4: exact pass rates of the policies and references; ``calibration.json`` / ``calibration.md``.

    For a family whose reward accepts more than the canonical answer (code, logic), the canonical answer's likelihood
    is a lower bound of the pass rate; ``calibration.md`` says so and reports beside it each model's sampled held-out
    estimate (:mod:`bots_verl.toy.heldout`, ``max_tokens`` the response budget, seeded by ``seed`` at step 0).

    Raises:
        ValueError: a code or logic build's calibration without ``max_tokens``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bots_verl.toy.calibrate import heldout_summary, per_cell, pool_summary
    from bots_verl.toy.families import family_of
    from bots_verl.toy.warmup import read_result
    from reference_eval.stats import compute_stats

    # the calibration is of these exact models: a re-warmed model (another spec) makes it stale
    names = policy_names + ["weak", "strong"]
    specs = {name: (read_result(out / "models" / name) or {}).get("spec") for name in names}
    single = family_of(family).single_answer
    if not single and max_tokens is None:
        raise ValueError(f"the {family} family's calibration samples its held-out estimate: pass max_tokens")
    cached = read_json(out / "calibration.json")
    if (
        cached is not None
        and cached.get("models") == names
        and cached.get("specs") == specs
        and (single or "heldout_sampled" in cached)
    ):
        logger.info("calibration: already done")
        stage.skipped = True
        return cached
    parse_prompt = family_of(family).parse_prompt
    train = pq.read_table(out / "train.parquet")
    pool = [parse_prompt(m[0]["content"]) for m in train.column("prompt").to_pylist()]
    heldout = [parse_prompt(p) for p in split_prompts(out / "val.parquet")]
    cells = [p.cell.name for p in pool]
    columns: dict[str, np.ndarray] = {
        "task_id": np.asarray(train.column("task_id").to_pylist()),
        WEAK_COLUMN: train.column(WEAK_COLUMN).to_numpy(),
        STRONG_COLUMN: train.column(STRONG_COLUMN).to_numpy(),
    }
    summary: dict[str, Any] = {"models": names, "specs": specs, "pool": {}, "heldout": {}}
    if not single:
        summary["lower_bound"] = True
        summary["heldout_sampled"] = {}
    for name in names:
        p_pool, _ = _exact(out / "models" / name, pool, family)
        p_held, g_held = _exact(out / "models" / name, heldout, family)
        columns[f"{name}_exact_pass_rate"] = p_pool
        summary["pool"][name] = pool_summary(p_pool)
        summary["heldout"][name] = heldout_summary(p_held, g_held)
        if not single:
            summary["heldout_sampled"][name] = _sampled(out / "models" / name, heldout, family, max_tokens, seed)
    calib = out / "calibration.parquet"
    table = pa.table({**{k: pa.array(v) for k, v in columns.items()}, "cell": pa.array(cells)})
    write_table_atomic(table, calib)
    summary["correlations"] = {}
    for name in policy_names:
        stats = compute_stats(calib, [f"{name}_exact_pass_rate", *REFERENCE_COLUMNS])
        summary["correlations"][name] = {"pearson": stats["pearson"], "spearman": stats["spearman"]}
    # The sampled columns against the same models' exact pass rates: a check of the whole chain (chat template,
    # generation, decoding, scorer); they must agree up to sampling noise.
    summary["sampled_vs_exact"] = {
        col: {
            "mean_sampled": float(np.mean(columns[col])),
            "mean_exact": float(np.mean(columns[f"{role}_exact_pass_rate"])),
            "mean_abs_diff": float(np.mean(np.abs(columns[col] - columns[f"{role}_exact_pass_rate"]))),
        }
        for role, col in (("weak", WEAK_COLUMN), ("strong", STRONG_COLUMN))
    }
    summary["per_cell"] = per_cell(
        cells,
        {name: columns[f"{name}_exact_pass_rate"] for name in summary["models"]}
        | {
            WEAK_COLUMN: columns[WEAK_COLUMN],
            STRONG_COLUMN: columns[STRONG_COLUMN],
        },
    )
    write_json(out / "calibration.json", summary)
    (out / "calibration.md").write_text(format_calibration(summary), encoding="utf-8")
    return summary


def format_calibration(summary: Mapping[str, Any]) -> str:
    """The calibration as markdown tables."""
    sampled = summary.get("heldout_sampled")
    if summary.get("lower_bound"):
        lines = ["# Toy testbed calibration (canonical lower bounds and sampled held-out estimates, temperature 1)", ""]
        lines += [
            "The reward accepts more than the canonical answer here: every figure but `sampled acc` is the canonical"
            " answer's likelihood, a lower bound of the pass rate (`held-out acc (lower bound)`, its `SE` over the"
            " prompts; the sampled reference columns are not bounded so). `sampled acc` is the held-out estimate the"
            " benchmark logs (bots_verl.toy.heldout): the lower bound plus the share of samples that pass off the"
            " canonical answer (`non-canonical`), with its sampling `SE` (k samples per prompt).",
            "",
        ]
    else:
        lines = ["# Toy testbed calibration (exact pass rates at temperature 1)", ""]
    header = ["model", "pool mean", "at 0", "at 1", "between", "mixed n=8", "mixed n=16"]
    header += ["held-out acc (lower bound)" if summary.get("lower_bound") else "held-out acc", "SE", "greedy"]
    if sampled:
        header += ["sampled acc", "non-canonical", "sampled SE", "k"]
    rows = []
    for name in summary["models"]:
        p, h = summary["pool"][name], summary["heldout"][name]
        shares = ("mean", "share_at_0", "share_at_1", "share_between", "mixed_share_n8", "mixed_share_n16")
        rows.append(
            [name, *(f"{p[k]:.3f}" for k in shares), f"{h['accuracy']:.3f}", f"{h['se_prompts']:.4f}"]
            + [f"{h['greedy_accuracy']:.3f}"]
        )
        if sampled:
            e = sampled[name]
            rows[-1] += [f"{e['estimate']:.3f}", f"{e['noncanonical']:.3f}", f"{e['se']:.4f}", str(e["samples"])]
    lines.append(markdown_table(header, rows))
    lines += ["", "Correlation of the reference columns with the policy's pool pass rates (Pearson / Spearman):", ""]

    def f(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    for name, corr in summary["correlations"].items():
        key = f"{name}_exact_pass_rate"
        for a, b in ((key, WEAK_COLUMN), (key, STRONG_COLUMN), (WEAK_COLUMN, STRONG_COLUMN)):
            lines.append(f"- {a} vs {b}: {f(corr['pearson'][a][b])} / {f(corr['spearman'][a][b])}")
    names = summary["models"]
    columns = [*names, WEAK_COLUMN, STRONG_COLUMN]
    per_cell = [[cell, row["tasks"], *(f"{row[n]:.2f}" for n in columns)] for cell, row in summary["per_cell"].items()]
    lines += ["", markdown_table(["cell", "tasks", *columns], per_cell)]
    return "\n".join(lines) + "\n"
