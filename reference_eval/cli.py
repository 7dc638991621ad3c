"""Command line: ``python -m reference_eval {collect,merge,stats,embed,label} ...``; ``--help`` explains each option."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from bots_verl.fileio import LockError
from bots_verl.rewards.success import SUCCESS_RULES, SuccessRule

from .data import DataError
from .results import ResultsError
from .scoring import ScoreError

logger = logging.getLogger("reference_eval")

__all__ = ["build_parser", "main"]

EPILOG = """\
workflow: collect a reference model's results, merge them into the parquet as a column, then check the column:
  python -m reference_eval collect --data train.parquet --model /models/Qwen2.5-7B-Instruct --out q7b.jsonl
  python -m reference_eval merge --data train.parquet --results q7b.jsonl --column qwen2.5_7b_pass_rate \\
      --out train.ref.parquet
  python -m reference_eval stats --data train.ref.parquet --columns qwen2.5_7b_pass_rate qwen3_30b_pass_rate \\
      --out-dir stats/
references on a tenth of the pool (issue 36): embed the prompts, label a spread subset, collect only that subset:
  python -m reference_eval embed --method text --data train.parquet --out emb.parquet
  python -m reference_eval collect ... --label-fraction 0.1 --label-by spread --embeddings emb.parquet
"""


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from err
    except RecursionError:
        raise argparse.ArgumentTypeError("JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with the three subcommands."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(
        prog="python -m reference_eval",
        description="Reference pass-rate columns for BOTS: sample a model on every prompt of a verl-format parquet, "
        "score with the training rewards, and add successes/attempts as a column.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (with tracebacks of errors)")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "collect",
        formatter_class=fmt,
        help="sample and score n responses per prompt; append per-prompt results (resumable)",
        description="Sample n responses per prompt with a reference model, score each with the training reward "
        "(by data_source), and append one JSON line per prompt to --out after every batch (flush + fsync). A rerun "
        "with the same settings skips prompts already in --out; different settings are refused. Every row's "
        "ground truth is checked before the model loads, and a second collect on the same --out is refused.",
    )
    c.add_argument("--data", required=True, help="verl-format parquet (data_source, prompt, reward_model, ...)")
    c.add_argument("--model", required=True, help="model directory (or a name the backend can load)")
    c.add_argument("--out", required=True, help="results file (JSON lines); an existing file is resumed")
    c.add_argument("--backend", choices=("vllm", "transformers"), default="vllm", help="generation backend")
    c.add_argument("-n", "--n", type=int, default=16, help="responses sampled per prompt (the pass-rate denominator)")
    c.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0 = greedy)")
    c.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1.0 = off)")
    c.add_argument("--top-k", type=int, default=-1, help="top-k sampling (-1 = off)")
    c.add_argument("--max-tokens", type=int, default=4096, help="maximum new tokens per response")
    c.add_argument("--seed", type=int, default=0, help="base seed; each prompt's seed derives from it and its task id")
    c.add_argument(
        "--chat-template-kwargs",
        type=_json_dict,
        default={},
        help="JSON object passed to apply_chat_template, e.g. '{\"enable_thinking\": false}'",
    )
    c.add_argument("--batch-size", type=int, default=256, help="prompts per generate call and per durable append")
    c.add_argument("--limit", type=int, default=None, help="evaluate at most this many new prompts, then stop")
    c.add_argument("--id-column", default="task_id", help="stable unique task id column; dotted for struct fields")
    c.add_argument("--prompt-column", default="prompt", help="chat-messages column")
    c.add_argument("--ground-truth-column", default="reward_model.ground_truth", help="ground-truth column (dotted)")
    c.add_argument(
        "--scorer",
        default="auto",
        help="auto (bots_verl.rewards, else verl's default_compute_score), bots, verl, or module:function",
    )
    c.add_argument(
        "--success-rule",
        choices=SUCCESS_RULES,
        default="auto",
        help="how a scored response counts as a success; use the training run's bots.success.rule (auto: the "
        "reward's 'acc', else score > --success-threshold)",
    )
    c.add_argument(
        "--success-threshold", type=float, default=0.0, help="score threshold of the rule (bots.success.threshold)"
    )
    c.add_argument(
        "--on-score-error",
        choices=("raise", "fail"),
        default="raise",
        help="a scorer exception on a response stops the run (raise), or is recorded as a scorer error, never a "
        "success, and the run goes on (fail); merge leaves such responses out of the pass rate, and a prompt with "
        "no scored response is NaN",
    )
    c.add_argument("--num-shards", type=int, default=1, help="data parallel: split the tasks into this many shards")
    c.add_argument("--shard-index", type=int, default=0, help="data parallel: the shard this process evaluates")
    c.add_argument("--save-responses", action="store_true", help="also store the raw responses in each record")
    _label_arguments(c)
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = c.add_argument_group("vllm backend")
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per model replica")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="fraction of GPU memory for vLLM")
    g.add_argument("--max-model-len", type=int, default=None, help="context length to allocate (default: model's)")
    g = c.add_argument_group("both backends")
    g.add_argument("--dtype", default=None, help="weight dtype (vllm default auto, transformers default float32)")
    g.add_argument("--device", default=None, help="transformers only: cpu, cuda, ... (default: cuda if available)")

    m = sub.add_parser(
        "merge",
        formatter_class=fmt,
        help="add successes/attempts as a float column, matched by task id",
        description="Add the pass rate (successes over scored responses) from results files as a float64 column, "
        "matched by task id. Rows without a result, or whose every response hit a scorer error, are NaN (counted "
        "in the report), never 0.0. Writes a new file atomically; --in-place replaces the input and keeps the old "
        "one as a timestamped .bak. Leftovers of an interrupted merge are removed (or reported) by the next run.",
    )
    m.add_argument("--data", required=True, help="input parquet")
    m.add_argument("--results", required=True, nargs="+", help="results files (e.g. one per shard), same settings")
    m.add_argument("--column", required=True, help="name of the new column, e.g. qwen2.5_7b_pass_rate")
    where = m.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="output parquet (a new file)")
    where.add_argument("--in-place", action="store_true", help="replace --data, keeping a timestamped .bak copy")
    m.add_argument("--force", action="store_true", help="overwrite an existing --out")
    m.add_argument("--replace-column", action="store_true", help="overwrite the column if it exists")
    m.add_argument("--id-column", default="task_id", help="stable unique task id column; dotted for struct fields")
    m.add_argument("--prompt-column", default="prompt", help="chat-messages column (verifies results' prompt hashes)")
    m.add_argument(
        "--skip-prompt-mismatch",
        action="store_true",
        help="leave rows whose result was collected for a different prompt as NaN instead of failing",
    )
    m.add_argument("--report", default=None, help="also write the merge report as JSON here")

    s = sub.add_parser(
        "stats",
        formatter_class=fmt,
        help="histograms, summaries, correlations and weak > strong counts of pass-rate columns",
        description="Summaries (NaN count, mean, quantiles, share of 0 and 1, the k/n grid) and a histogram PNG per "
        "column; Pearson/Spearman correlations and weak > strong row counts for columns given weak first.",
    )
    s.add_argument("--data", required=True, help="parquet with pass-rate columns")
    s.add_argument("--columns", required=True, nargs="+", help="pass-rate columns, weakest reference first")
    s.add_argument("--out-dir", default=None, help="write hist_*.png, pair_*.png and stats.json here")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")

    e = sub.add_parser(
        "embed",
        formatter_class=fmt,
        help="one vector per prompt (task-similarity graph of bots.task_embeddings)",
        description="Write an embedding file (task_id, embedding) for bots.task_embeddings: 'text' hashes byte "
        "n-grams of the prompt text (TF-IDF, seeded sparse random projection; numpy only), 'policy' mean-pools the "
        "policy model's last hidden layer over the chat-templated prompt (transformers).",
    )
    e.add_argument("--data", required=True, help="verl-format parquet: the training pool")
    e.add_argument("--out", required=True, help="embedding parquet to write (atomically)")
    e.add_argument("--method", choices=("text", "policy"), default="text", help="what the vectors are made from")
    e.add_argument("--model", default=None, help="policy: the policy model directory at step 0")
    e.add_argument("--dims", type=int, default=256, help="text: coordinates per task")
    e.add_argument("--seed", type=int, default=0, help="text: seed of the random projection")
    e.add_argument("--id-column", default="task_id", help="task id column training matches by (bots.task_id_field)")
    e.add_argument("--prompt-column", default="prompt", help="chat-messages column")
    e.add_argument("--batch-size", type=int, default=32, help="policy: prompts per forward pass")
    e.add_argument("--device", default=None, help="policy: cpu, cuda, ... (default: cuda if available)")
    e.add_argument("--dtype", default="float32", help="policy: weight dtype")
    e.add_argument("--max-length", type=int, default=None, help="policy: truncate rendered prompts to this many tokens")
    e.add_argument(
        "--chat-template-kwargs", type=_json_dict, default={}, help="policy: JSON object for apply_chat_template"
    )
    e.add_argument("--force", action="store_true", help="overwrite an existing --out")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")

    lab = sub.add_parser(
        "label",
        formatter_class=fmt,
        help="which tasks a labelled subset evaluates, and the generations it saves (nothing generated)",
        description="Print the labelled subset that collect --label-fraction would evaluate and the generations it "
        "saves (skipped tasks x samples x reference models); --out writes the subset's task ids as JSON.",
    )
    lab.add_argument("--data", required=True, help="verl-format parquet: the training pool")
    lab.add_argument("--id-column", default="task_id", help="stable unique task id column; dotted for struct fields")
    lab.add_argument("-n", "--n", type=int, default=16, help="responses per prompt a collect would sample")
    lab.add_argument("--models", type=int, default=2, help="reference models the columns need")
    lab.add_argument("--out", default=None, help="write the plan and the labelled task ids here (JSON)")
    lab.add_argument(
        "--mask-columns",
        nargs="+",
        default=None,
        help="existing pass-rate columns to restrict to the subset (NaN elsewhere), e.g. GURU's shipped ones: what "
        "collect --label-fraction and merge would give, since each prompt's samples are seeded by its task id alone",
    )
    lab.add_argument("--suffix", default=None, help="--mask-columns: name of the restricted copies: <column><suffix>")
    lab.add_argument("--out-data", default=None, help="--mask-columns: the parquet to write (input + copies)")
    _label_arguments(lab, required=True)
    return parser


def _label_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    g = parser.add_argument_group("labelled subset (issue 36)")
    g.add_argument(
        "--label-fraction",
        type=float,
        default=None,
        required=required,
        help="evaluate only this share of the tasks, in (0, 1]; merge leaves the others NaN",
    )
    g.add_argument(
        "--label-by",
        choices=("uniform", "spread"),
        default="spread",
        help="uniform: at random; spread: spread over the embedding space (needs --embeddings)",
    )
    g.add_argument("--label-seed", type=int, default=0, help="seed of the choice (same seed, same subset)")
    g.add_argument("--embeddings", default=None, help="the pool's embedding file (python -m reference_eval embed)")


def _label_plan(args: argparse.Namespace, samples: int, models: int = 2) -> Any:
    """The labelled subset of ``--label-fraction`` (None without it)."""
    if args.label_fraction is None:
        if args.embeddings is not None:
            raise ValueError("--embeddings is read only with --label-fraction")
        return None
    from .data import read_table, task_ids
    from .label import choose_subset

    ids = task_ids(read_table(args.data), args.id_column)
    return choose_subset(
        ids,
        args.label_fraction,
        args.label_by,
        seed=args.label_seed,
        embeddings=args.embeddings,
        samples=samples,
        models=models,
    )


def _collect(args: argparse.Namespace) -> dict[str, Any]:
    from .backends import make_backend
    from .collect import collect
    from .results import Settings
    from .scoring import resolve_scorer

    try:
        scorer = resolve_scorer(args.scorer, SuccessRule(args.success_rule, args.success_threshold))
    except (ImportError, AttributeError) as err:
        raise ValueError(f"--scorer {args.scorer}: cannot load it ({type(err).__name__}: {err})") from err
    settings = Settings(
        model=args.model,
        n=args.n,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_tokens=args.max_tokens,
        seed=args.seed,
        scorer=scorer.name,
        success_rule=scorer.rule.rule,
        success_threshold=scorer.rule.threshold,
        chat_template_kwargs=args.chat_template_kwargs,
    )
    kwargs: dict[str, Any] = {"chat_template_kwargs": args.chat_template_kwargs}
    if args.backend == "vllm":
        kwargs.update(
            tensor_parallel_size=args.tensor_parallel_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            dtype=args.dtype or "auto",
            seed=args.seed,
        )
    else:
        kwargs.update(device=args.device, dtype=args.dtype or "float32")

    label_plan = _label_plan(args, args.n)
    report = collect(
        args.data,
        args.out,
        lambda: make_backend(args.backend, args.model, **kwargs),
        settings,
        scorer,
        id_column=args.id_column,
        prompt_column=args.prompt_column,
        ground_truth_column=args.ground_truth_column,
        batch_size=args.batch_size,
        limit=args.limit,
        num_shards=args.num_shards,
        shard_index=args.shard_index,
        save_responses=args.save_responses,
        on_score_error=args.on_score_error,
        progress=not args.no_progress,
        label_plan=label_plan,
    )
    if label_plan is not None:
        print(label_plan.summary(), file=sys.stderr)
    return report.to_dict()


def _merge(args: argparse.Namespace) -> dict[str, Any]:
    from pathlib import Path

    from .merge import merge

    report = merge(
        args.data,
        args.results,
        args.column,
        out=args.out,
        in_place=args.in_place,
        force=args.force,
        replace_column=args.replace_column,
        id_column=args.id_column,
        prompt_column=args.prompt_column,
        skip_prompt_mismatch=args.skip_prompt_mismatch,
    ).to_dict()
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    return report


def _embed(args: argparse.Namespace) -> dict[str, Any]:
    from .embed import embed

    return embed(
        args.data,
        args.out,
        args.method,
        model=args.model,
        dims=args.dims,
        seed=args.seed,
        id_column=args.id_column,
        prompt_column=args.prompt_column,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        max_length=args.max_length,
        chat_template_kwargs=args.chat_template_kwargs,
        force=args.force,
        progress=not args.no_progress,
    ).to_dict()


def _label(args: argparse.Namespace) -> dict[str, Any]:
    from bots_verl.fileio import write_json_atomic

    if args.mask_columns and not (args.suffix and args.out_data):
        raise ValueError("--mask-columns needs --suffix and --out-data")
    plan = _label_plan(args, args.n, args.models)
    print(plan.summary(), file=sys.stderr)
    report = plan.to_dict()
    if args.mask_columns:
        from .label import write_masked_columns

        report["columns"] = write_masked_columns(
            args.data, args.out_data, plan, args.mask_columns, args.suffix, args.id_column
        )
    if args.out:
        write_json_atomic(args.out, {**report, "task_ids": list(plan.task_ids)})
        report["out"] = args.out
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 2 on bad input or results, a concurrent writer, a scorer error or a file that
        cannot be read or written (one message says what to fix; ``-v`` adds the traceback).
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        # the subcommands that print their report as JSON
        reporting = {"collect": _collect, "merge": _merge, "embed": _embed, "label": _label}
        if args.command in reporting:
            print(json.dumps(reporting[args.command](args), indent=2, default=str))
        else:
            from .stats import compute_stats, format_stats

            result = compute_stats(args.data, args.columns, args.out_dir)
            print(json.dumps(result, indent=2) if args.json else format_stats(result))
    except (DataError, ResultsError, ValueError, LockError, ScoreError, OSError, pa.ArrowException) as err:
        logger.debug("traceback of the error below", exc_info=True)
        logger.error("%s", _describe(err))
        return 2
    return 0


def _describe(err: BaseException) -> str:
    """One line for the user: the message of our errors; the file of an OSError; the type of an Arrow error."""
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, pa.ArrowException | OSError):
        return f"{type(err).__name__}: {err}"
    return str(err)


if __name__ == "__main__":
    sys.exit(main())
