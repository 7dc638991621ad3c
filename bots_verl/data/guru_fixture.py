"""Tiny GURU-shaped parquet files with the real per-file schemas (guru.md §2): the data-prep and recipe tests, the
recipes' CPU mode and the CPU pipeline (``recipes/cpu_pipeline.sh``) train on them.

``python -m bots_verl.data.guru_fixture OUT_DIR`` writes a miniature GURU copy (``train/``, ``online_eval/``) that
``python -m bots_verl.data.guru --guru-dir OUT_DIR`` prepares like the real one.

Each file keeps its own schema, as the released files do: the math file carries Big-Math leftovers
(``source``, ``domain``, ``llama8b_solve_rate``, ``is_unique``, ``solution``), code files keep LeetCode/TACO columns,
ground truths are a string (math, graph), a JSON string (code), a struct (zebra), ``list<string>`` (ordering) or
``list<list<int64>>`` (ARC), and ``extra_info`` differs per file (``index``, ``id`` or ``idx``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PROMPT = pa.list_(pa.struct([pa.field("content", pa.string()), pa.field("role", pa.string())]))


def _msg(text: str) -> list[dict[str, str]]:
    return [{"content": text, "role": "user"}]


def _write(path: Path, columns: dict[str, pa.Array]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def _rates(n: int, weak: list[float | None] | None = None, strong: list[float | None] | None = None):
    weak = weak if weak is not None else [round((i % 8) / 16, 4) for i in range(n)]
    strong = strong if strong is not None else [min(1.0, w + 0.25) if w is not None else 0.5 for w in weak]
    return {
        "qwen2.5_7b_pass_rate": pa.array(weak, pa.float64()),
        "qwen3_30b_pass_rate": pa.array(strong, pa.float64()),
    }


def _common(n: int, data_source: str, ability: str, prompts: list[str], gts: pa.Array, info: pa.Array, **rates):
    columns = {
        "data_source": pa.array([data_source] * n),
        "prompt": pa.array([_msg(p) for p in prompts], PROMPT),
        "ability": pa.array([ability] * n),
        "apply_chat_template": pa.array([True] * n),
        "reward_model": pa.StructArray.from_arrays([gts, pa.array(["rule"] * n)], names=["ground_truth", "style"]),
        "extra_info": info,
    }
    if rates.get("with_rates", True):
        columns.update(_rates(n, rates.get("weak"), rates.get("strong")))
    return columns


def math_file(path: Path, n: int = 12, weak=None, strong=None, prompts=None, gts=None) -> Path:
    """``math__combined_54.4k``: 13 columns in the released order, ``extra_info.index`` int64."""
    prompts = prompts or [f"What is {i} + {i}? Please output the final answer within \\boxed{{}}." for i in range(n)]
    gts = gts or [str(2 * i) for i in range(n)]
    info = pa.array(
        [
            {"index": 1000 + i, "original_question": prompts[i], "reward_metric": "default", "split": "train"}
            for i in range(n)
        ]
    )
    columns = {
        "source": pa.nulls(n, pa.string()),
        "domain": pa.nulls(n, pa.string()),
        "llama8b_solve_rate": pa.array([float("nan")] * n),
    }
    columns.update(
        _common(
            n, "math__merged_deduped_dapo_or1_dataset", "math", prompts, pa.array(gts), info, weak=weak, strong=strong
        )
    )
    columns.update({"is_unique": pa.array([True] * n), "solution": pa.array(["..."] * n)})
    # Keep the released column order: pass-rate columns last.
    for key in ("qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"):
        columns[key] = columns.pop(key)
    return _write(path, columns)


def eval_math_file(path: Path, n: int, data_source: str, repeat: int = 1, with_rates: bool = False) -> Path:
    prompts = [f"Eval problem {i % (n // repeat)}. \\boxed{{}}" for i in range(n)]
    info = pa.array([{"index": i, "split": "test"} for i in range(n)])
    cols = _common(
        n,
        data_source,
        "math",
        prompts,
        pa.array([str(i % (n // repeat)) for i in range(n)]),
        info,
        with_rates=with_rates,
    )
    return _write(path, cols)


#: a correct program for the fixture's code problems, per GURU test style; the known-answer rollouts
#: (:mod:`bots_verl.verl_cpu.known_answers`) answer with them. LeetCode's functional tests call ``Solution().total``
#: (``List`` comes from the problem's ``prefix``); the stdin tests feed two integers and expect their sum.
CALL_BASED_SOLUTION = "class Solution:\n    def total(self, nums: List[int]) -> int:\n        return sum(nums)\n"
STDIN_SOLUTION = "import sys\n\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"


def code_solution(ground_truth: str) -> str:
    """The correct program for a fixture code problem, from its ground truth (GURU's JSON test spec).

    Raises:
        ValueError: for tests the fixture does not write.
    """
    tests = json.loads(ground_truth)
    if "functional" in tests and "Solution().total" in tests["functional"]:
        return CALL_BASED_SOLUTION
    if tests.get("inputs") == ["1 2\n"]:
        return STDIN_SOLUTION
    raise ValueError(f"not a guru_fixture code problem: {ground_truth[:200]!r}")


def leetcode_file(path: Path, n: int = 3) -> Path:
    """``codegen__leetcode2k``: functional tests, a ``prefix`` in extra_info, LeetCodeDataset leftovers."""
    test = "def check(candidate):\n    assert candidate([1, 2]) == 3\n\ncheck(Solution().total)\n"
    gts = pa.array([json.dumps({"functional": test})] * n)
    info = pa.array(
        [
            {
                "split": "train",
                "index": i,
                "reference": "...",
                "original_prompt": "...",
                "dataset": "LeetCodeDataset",
                "prefix": "from typing import *\n",
                "question_title": f"q{i}",
                "difficulty": "Easy",
            }
            for i in range(n)
        ]
    )
    cols = _common(n, "codegen__leetcode2k", "codegen", [f"### Question: leetcode {i}" for i in range(n)], gts, info)
    cols.update(
        {
            "task_id": pa.array([f"two-sum-{i}" for i in range(n)]),
            "query": pa.array(["..."] * n),
            "entry_point": pa.array(["Solution().total"] * n),
        }
    )
    return _write(path, cols)


def stdin_code_file(path: Path, name: str, dataset: str, n: int = 3, extra_cols: bool = False) -> Path:
    """``codegen__{livecodebench,primeintellect,taco}``: stdin/stdout tests (+ complete lists), no prefix."""
    tests = {"inputs": ["1 2\n"], "outputs": ["3\n"], "complete_inputs": ["1 2\n"] * 3, "complete_outputs": ["3\n"] * 3}
    gts = pa.array([json.dumps(tests)] * n)
    info = pa.array([{"split": "train", "index": i, "reference": "...", "dataset": dataset} for i in range(n)])
    cols = _common(n, f"codegen__{name}", "codegen", [f"{name} problem {i}" for i in range(n)], gts, info)
    if extra_cols:
        cols["input_output"] = pa.array([json.dumps(tests)] * n)
    return _write(path, cols)


def zebra_file(path: Path, n: int = 3, data_source: str = "logic__zebra_puzzle_dataset", with_rates=True) -> Path:
    gt_type = pa.struct([pa.field("header", pa.list_(pa.string())), pa.field("rows", pa.list_(pa.list_(pa.string())))])
    gts = pa.array([{"header": ["House", "Name"], "rows": [["1", f"A{i}"], ["2", f"B{i}"]]} for i in range(n)], gt_type)
    info = pa.array(
        [
            {"id": f"zebra-{i}", "grid_size": "2x2", "raw_instruction": "...", "raw_input": "...", "split": "train"}
            for i in range(n)
        ]
    )
    return _write(
        path,
        _common(
            n, data_source, "logical_reasoning", [f"zebra {i}" for i in range(n)], gts, info, with_rates=with_rates
        ),
    )


def ordering_file(path: Path, n: int = 3, data_source: str = "logic__ordering_puzzle_dataset", with_rates=True):
    gts = pa.array([["pigeon", "sparrow", f"quail{i}"] for i in range(n)], pa.list_(pa.string()))
    info = pa.array(
        [{"id": i, "raw_instruction": "...", "raw_input": "...", "num_objects": 3, "split": "train"} for i in range(n)]
    )
    return _write(
        path,
        _common(
            n, data_source, "logical_reasoning", [f"order {i}" for i in range(n)], gts, info, with_rates=with_rates
        ),
    )


def graph_file(path: Path, n: int = 3) -> Path:
    info = pa.array([{"id": i, "lookahead": 2, "split": "train"} for i in range(n)])
    return _write(
        path,
        _common(
            n,
            "logic__graph_logical_dataset",
            "logical_reasoning",
            [f"graph {i}" for i in range(n)],
            pa.array(["fdebme"] * n),
            info,
        ),
    )


def arc_file(path: Path, data_source: str, n: int = 3, with_rates=True) -> Path:
    gts = pa.array([[[i, 0], [0, i]] for i in range(n)], pa.list_(pa.list_(pa.int64())))
    info = pa.array([{"split": "train", "index": i} for i in range(n)])
    return _write(
        path,
        _common(
            n, data_source, "reasoning", [f"{data_source} {i}" for i in range(n)], gts, info, with_rates=with_rates
        ),
    )


def build_guru_dir(root: Path, **math_kwargs: Any) -> Path:
    """Write a complete miniature GURU copy (train + online_eval files of the math, code and logic domains)."""
    train, online = root / "train", root / "online_eval"
    math_file(train / "math__combined_54.4k.parquet", **math_kwargs)
    leetcode_file(train / "codegen__leetcode2k_1.3k.parquet")
    stdin_code_file(train / "codegen__livecodebench_440.parquet", "livecodebench", "LiveCodeBench", extra_cols=True)
    stdin_code_file(train / "codegen__primeintellect_7.5k.parquet", "primeintellect", "PrimeIntellect")
    stdin_code_file(train / "codegen__taco_8.8k.parquet", "taco", "likaixin/TACO-verified")
    arc_file(train / "logic__arcagi1_111.parquet", "simulation__arcagi1")
    arc_file(train / "logic__arcagi2_190.parquet", "simulation__arcagi2")
    arc_file(train / "logic__barc_1.6k.parquet", "simulation__barc")
    graph_file(train / "logic__graph_logical_1.2k.parquet")
    ordering_file(train / "logic__ordering_puzzle_1.9k.parquet")
    zebra_file(train / "logic__zebra_puzzle_1.3k.parquet")
    eval_math_file(online / "math__math_500.parquet", 5, "math__math_500", with_rates=True)
    eval_math_file(online / "math__aime_repeated_8x_240.parquet", 16, "math__aime_repeated_8x", repeat=8)
    stdin_code_file(online / "codegen__livecodebench_279.parquet", "livecodebench", "LiveCodeBench")
    leetcode_file(online / "codegen__humaneval_164.parquet")
    zebra_file(online / "logic__zebra_puzzle_dataset_200.parquet", with_rates=False)
    ordering_file(online / "logic__ordering_puzzle_dataset_100.parquet", with_rates=False)
    arc_file(online / "logic__arcagi1_200.parquet", "simulation__arcagi1", with_rates=False)
    return root


def write_bad_math_train(guru: Path) -> Path:
    """Replace the math train file by 8 rows with one of each problem: NaN and null weak rates, weak > strong, a weak
    rate of 1.5, a duplicate prompt (row 5 repeats row 4) and an empty ground truth (row 7)."""
    n = 8
    weak = [0.1, float("nan"), None, 0.9, 0.2, 0.3, 1.5, 0.4]
    strong = [0.5, 0.5, 0.5, 0.2, 0.6, 0.7, 1.0, 0.8]
    prompts = [f"p{i}" for i in range(n)]
    prompts[5] = prompts[4]
    gts = [str(i) for i in range(n)]
    gts[7] = ""
    path = guru / "train" / "math__combined_54.4k.parquet"
    return math_file(path, n=n, weak=weak, strong=strong, prompts=prompts, gts=gts)


def main(argv: list[str] | None = None) -> None:
    """Command line: write the miniature GURU copy."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    args = parser.parse_args(argv)
    print(build_guru_dir(Path(args.out_dir)))


if __name__ == "__main__":
    main()
