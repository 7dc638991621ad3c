"""Known-answer rollouts: a test double for the model's *text* only, so a CPU run shows right answers scoring 1.

A random tiny model scores 0 on GURU's tasks, so a CPU run alone cannot show that a right answer reaches the posterior
as a success through verl's reward workers. With ``+actor_rollout_ref.rollout.custom.known_answers=FILE`` the ``hf``
rollout server (:mod:`.hf_server`) answers every prompt listed in ``FILE`` with that task's scripted responses
instead of sampling: the ``k``-th rollout of a prompt (in arrival order, counted per weight version) gets
``responses[k % len(responses)]``. Everything else stays real: verl's agent loop, TransferQueue, the reward workers
(math-verify, the bubblewrap sandbox or SandboxFusion, the logic scorers), the replay buffer, the evidence and the
posterior, and the GRPO update on the scripted tokens (their log-probabilities come from a forward pass of the current
weights, at the request's temperature). Prompts not in the file are sampled from the model as usual (validation).

The script is built from a prepared parquet (:func:`build_known_answers`): tasks are split by ``task_id % 3`` into
*right* (every rollout answers correctly), *mixed* (rollouts alternate right and wrong) and *wrong*, and each right
answer takes a domain-specific form:

- math: the ground truth in several LaTeX forms (``\\boxed{g}``, ``$\\boxed{\\frac{2g}{2}}$``, ``\\boxed{g.0}``, ...);
- code: a correct program (from ``solution_for``; :func:`bots_verl.data.guru_fixture.code_solution` for the fixture)
  in a fenced block, for GURU's call-based and stdin tests alike;
- logic: the ground-truth grid, ordering, path or ARC grid inside ``<answer>``.

:func:`expected_outcomes` gives, per task, the successes and attempts the posterior must receive when the task is
selected with ``n`` rollouts. ``python -m bots_verl.verl_cpu.known_answers DATA.parquet --out FILE`` writes a script
(and checks every scripted response with the training reward first).

A script file is checked whole when it is read (:func:`load_script`), and by ``bots_verl.main``'s ``check_config``
before Ray starts (:func:`check_known_answers`, registered by :mod:`.config_checks`): a malformed one (an empty or
non-list ``responses``, an empty prompt, which would match every prompt, a top-level list, ...) is a ``ValueError``
naming the file and the task.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "CONFIG_KEY",
    "FORMAT",
    "KnownAnswers",
    "build_known_answers",
    "check_known_answers",
    "check_posterior",
    "check_script",
    "expected_outcomes",
    "known_answers_path",
    "load_script",
    "pattern_of",
    "validate_script",
]

FORMAT = "bots-known-answers"
VERSION = 1
#: the three answer patterns, by ``task_id % 3``: every rollout right, alternating right/wrong, every rollout wrong
PATTERNS = ("right", "mixed", "wrong")
#: where a run names its script (read by the ``hf`` rollout server through :func:`known_answers_path`)
CONFIG_KEY = "actor_rollout_ref.rollout.custom.known_answers"
_TOP_KEYS = {"format", "version", "tasks"}
_TASK_KEYS = {"task_id", "prompt", "data_source", "responses", "correct"}


def pattern_of(task_id: int) -> str:
    """The answer pattern of a task (``right``, ``mixed`` or ``wrong``)."""
    return PATTERNS[int(task_id) % len(PATTERNS)]


def _math_forms(truth: str) -> list[str]:
    try:
        value = int(truth.strip())
    except ValueError:
        return [f"The answer is \\boxed{{{truth}}}."]
    return [
        f"The answer is \\boxed{{{value}}}.",
        f"$\\boxed{{\\frac{{{2 * value}}}{{2}}}}$",
        f"So we get \\boxed{{{value}.0}}",
        f"\\(\\boxed{{{value}}}\\)",
    ]


def _math_wrong(truth: str) -> str:
    try:
        return f"The answer is \\boxed{{{int(truth.strip()) + 1}}}."
    except ValueError:
        return "The answer is \\boxed{\\text{unknown}}."


def _logic_answer(truth: str) -> str:
    try:
        value = json.loads(truth)
    except json.JSONDecodeError:
        value = truth
    body = value if isinstance(value, str) else json.dumps(value)
    return f"Reasoning done.\n<answer>{body}</answer>"


def _responses(domain: str, truth: str, task_id: int, solution_for: Callable[[str], str] | None) -> tuple[str, str]:
    """(a right response, a wrong response) for one task."""
    if domain == "math":
        forms = _math_forms(truth)
        return forms[task_id % len(forms)], _math_wrong(truth)
    if domain == "code":
        if solution_for is None:
            raise ValueError("code tasks need solution_for (a correct program per ground truth)")
        return f"```python\n{solution_for(truth)}```", "```python\nprint('no idea')\n```"
    if domain == "logic":
        return _logic_answer(truth), "Reasoning done.\n<answer>[]</answer>"
    raise ValueError(f"no known answers for domain {domain!r}")


def build_known_answers(
    rows: Iterable[dict[str, Any]], *, solution_for: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """The known-answer script of a prepared pool.

    Args:
        rows: records with ``task_id``, ``data_source``, ``prompt`` (chat messages) and ``reward_model``.
        solution_for: a correct program for a code task's ground truth (needed when the pool holds code tasks).

    Returns:
        The script (JSON-serialisable): ``{"format", "version", "tasks": [{task_id, prompt, data_source, responses,
        correct}]}`` where ``prompt`` is the last user message and ``correct[i]`` says whether ``responses[i]`` is
        meant to score.

    Raises:
        ValueError: for a row without a user message, a duplicate prompt or an unknown domain.
    """
    from bots_verl.rewards import domain_of

    tasks, seen = [], set()
    for row in rows:
        task_id = int(row["task_id"])
        users = [m["content"] for m in row["prompt"] if m.get("role") == "user"]
        if not users:
            raise ValueError(f"task {task_id} has no user message")
        if users[-1] in seen:
            raise ValueError(f"task {task_id}: its prompt appears twice in the pool; known answers key by prompt")
        seen.add(users[-1])
        truth = row["reward_model"]["ground_truth"]
        right, wrong = _responses(domain_of(row["data_source"]), str(truth), task_id, solution_for)
        pattern = pattern_of(task_id)
        responses = {"right": [right], "mixed": [right, wrong], "wrong": [wrong]}[pattern]
        tasks.append(
            {
                "task_id": task_id,
                "prompt": users[-1],
                "data_source": row["data_source"],
                "responses": responses,
                "correct": [r is right for r in responses],
            }
        )
    return {"format": FORMAT, "version": VERSION, "tasks": tasks}


def expected_outcomes(script: dict[str, Any], n: int) -> dict[int, tuple[int, int]]:
    """Per task id, ``(successes, attempts)`` that one selection with ``n`` rollouts must deliver to the posterior."""
    out = {}
    for task in script["tasks"]:
        correct = task["correct"]
        out[int(task["task_id"])] = (sum(bool(correct[k % len(correct)]) for k in range(n)), n)
    return out


def check_script(script: dict[str, Any], rows: Iterable[dict[str, Any]], **reward_kwargs: Any) -> None:
    """Score every scripted response with the training reward; each must score as its ``correct`` flag says.

    Raises:
        ValueError: naming the first task and response whose score disagrees.
    """
    from bots_verl.rewards import compute_score

    by_id = {int(r["task_id"]): r for r in rows}
    for task in script["tasks"]:
        row = by_id[int(task["task_id"])]
        for response, correct in zip(task["responses"], task["correct"], strict=True):
            result = compute_score(
                row["data_source"],
                response,
                row["reward_model"]["ground_truth"],
                extra_info=row.get("extra_info"),
                **reward_kwargs,
            )
            if bool(result["acc"]) != bool(correct):
                raise ValueError(
                    f"task {task['task_id']} ({row['data_source']}): the scripted response {response[:80]!r} scores "
                    f"acc={result['acc']}, not {correct}"
                )


def check_posterior(data_pt: str | Path, train_parquet: str | Path, script: dict[str, Any], n: int) -> dict[str, Any]:
    """Check that a run's posterior received exactly the scripted evidence, by replaying the run in the numpy core.

    A fresh selector with the run's selector, hyperparameters, seed and reference columns (all read from the
    checkpoint's fingerprint and the train parquet) must select what the run dispatched at every step, and after
    being fed :func:`expected_outcomes` for those selections its whole state (posterior, RNG, counters) must equal
    the checkpoint's, bit for bit. A success counted as a failure, a lost or doubled rollout, or an outcome credited
    to another task changes the posterior and fails the check.

    Args:
        data_pt: the run's ``global_step_N/data.pt``.
        train_parquet: the run's ``data.train_files`` (one file).
        script: the known-answer script the run's rollout used.
        n: rollouts per task (``actor_rollout_ref.rollout.n``).

    Returns:
        ``{"steps", "selections", "successes", "attempts"}``: what the posterior received in total.

    Raises:
        ValueError: naming the step and what differs.
    """
    import numpy as np
    import pyarrow.parquet as pq

    from bots_verl.core import build_selector
    from bots_verl.integration.transport.sampler_state import checkpoint_sampler_state

    saved = checkpoint_sampler_state(data_pt)
    fingerprint = saved["fingerprint"]
    table = pq.read_table(train_parquet)
    columns = fingerprint["reference_columns"]["names"]
    references = np.stack([table[c].to_numpy() for c in columns], axis=1).astype(float) if columns else None
    state = saved["selector_state"]
    selector = build_selector(
        fingerprint["selector"]["name"],
        table.num_rows,
        reference_pass_rates=references,
        seed=state["seed"],
        **fingerprint["selector"]["hparams"],
    )
    expected = expected_outcomes(script, n)
    task_ids = np.asarray(saved["task_ids"])
    total_successes = total_attempts = 0
    for step, positions in saved["dispatch_log"]:
        chosen = selector.select(len(positions))
        if list(map(int, chosen)) != list(map(int, positions)):
            raise ValueError(f"step {step}: the run dispatched {positions}, the replay selects {list(chosen)}")
        outcomes = [expected[int(task_ids[p])] for p in positions]
        successes = np.array([o[0] for o in outcomes], dtype=float)
        attempts = np.array([o[1] for o in outcomes], dtype=float)
        selector.update(np.asarray(positions), successes, attempts)
        total_successes += int(successes.sum())
        total_attempts += int(attempts.sum())
    if total_attempts != int(saved["attempts"]):
        raise ValueError(f"the posterior received {saved['attempts']} rollouts, the script gives {total_attempts}")
    replayed = selector.state_dict()
    posterior, run_posterior = replayed["extra"]["posterior"], state["extra"]["posterior"]
    for key in ("alpha", "beta"):
        if np.asarray(posterior[key]).tobytes() != np.asarray(run_posterior[key]).tobytes():
            raise ValueError(
                f"posterior {key} differs from the replay with the scripted evidence: run {run_posterior[key]}, "
                f"replay {posterior[key]}"
            )
    return {
        "steps": len(saved["dispatch_log"]),
        "selections": sum(len(p) for _, p in saved["dispatch_log"]),
        "successes": total_successes,
        "attempts": total_attempts,
    }


def _task_error(task: Any, index: int, source: str, problem: str) -> ValueError:
    task_id = task.get("task_id") if isinstance(task, dict) else None
    name = f"task {index}" + (f" (task_id {task_id!r})" if task_id is not None else "")
    return ValueError(f"{source}: {name}: {problem}")


def _check_task(task: Any, index: int, source: str) -> None:
    def fail(problem: str) -> ValueError:
        return _task_error(task, index, source, problem)

    if not isinstance(task, dict):
        raise fail(f"must be an object with {sorted(_TASK_KEYS)}, got {type(task).__name__}")
    missing, unknown = sorted(_TASK_KEYS - set(task)), sorted(set(task) - _TASK_KEYS)
    if missing or unknown:
        raise fail(f"missing keys {missing}, unknown keys {unknown}; a task has exactly {sorted(_TASK_KEYS)}")
    if not isinstance(task["task_id"], int) or isinstance(task["task_id"], bool):
        raise fail(f"task_id must be an integer, got {task['task_id']!r}")
    if not isinstance(task["prompt"], str) or not task["prompt"].strip():
        # the server matches a task by its prompt inside the rendered one: an empty prompt would match every prompt
        raise fail(f"prompt must be a non-empty string, got {task['prompt']!r}")
    if not isinstance(task["data_source"], str) or not task["data_source"]:
        raise fail(f"data_source must be a non-empty string, got {task['data_source']!r}")
    responses, correct = task["responses"], task["correct"]
    if not isinstance(responses, list) or not responses:
        # a string would be cycled one character per rollout, an empty list divides by zero mid-run
        raise fail(f"responses must be a non-empty list of strings, got {responses!r:.80}")
    bad = [i for i, r in enumerate(responses) if not isinstance(r, str)]
    if bad:
        raise fail(f"responses[{bad[0]}] must be a string, got {responses[bad[0]]!r:.80}")
    if not isinstance(correct, list) or len(correct) != len(responses):
        raise fail(f"correct must be a list of {len(responses)} flags (one per response), got {correct!r:.80}")
    if any(not isinstance(c, int) or c not in (0, 1) for c in correct):
        raise fail(f"correct must hold true/false (or 1/0), got {correct!r:.80}")


def validate_script(script: Any, source: str = "known-answers script") -> dict[str, Any]:
    """Check a whole known-answer script: its format and every task's shape.

    Args:
        script: the parsed JSON.
        source: what the error names (the file).

    Returns:
        ``script``, unchanged.

    Raises:
        ValueError: ``"<source>: task <i> (task_id <id>): <problem>"`` for the first malformed task, or the problem
            of the whole script (not an object, another format or version, no tasks, repeated prompts or ids).
    """
    if not isinstance(script, dict):
        raise ValueError(f"{source}: must be a JSON object with {sorted(_TOP_KEYS)}, got a {type(script).__name__}")
    if script.get("format") != FORMAT or script.get("version") != VERSION:
        raise ValueError(
            f"{source}: not a {FORMAT} v{VERSION} script (format={script.get('format')!r}, "
            f"version={script.get('version')!r})"
        )
    unknown = sorted(set(script) - _TOP_KEYS)
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown}; a script has {sorted(_TOP_KEYS)}")
    tasks = script.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise ValueError(f"{source}: tasks must be a non-empty list, got {tasks!r:.80}")
    prompts: dict[str, int] = {}
    ids: dict[int, int] = {}
    for index, task in enumerate(tasks):
        _check_task(task, index, source)
        for seen, key in ((prompts, task["prompt"]), (ids, task["task_id"])):
            if key in seen:
                what = "prompt" if seen is prompts else "task_id"
                raise _task_error(task, index, source, f"its {what} repeats task {seen[key]}'s")
            seen[key] = index
    return script


def load_script(path: str | Path) -> dict[str, Any]:
    """Read and check a known-answer script file (:func:`validate_script`).

    Raises:
        ValueError: naming the file (unreadable, not JSON, or malformed; a malformed task is named too).
    """
    source = f"known-answers file {path}"
    try:
        script = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{source}: {exc}") from exc
    return validate_script(script, source)


def check_known_answers(config: Any) -> dict[str, Any] | None:
    """The run's known-answer script (``actor_rollout_ref.rollout.custom.known_answers``), checked before Ray.

    Args:
        config: the composed config.

    Returns:
        The script, or None when the run has none.

    Raises:
        ValueError: naming :data:`CONFIG_KEY` and the file, for a missing or malformed file.
    """
    path = known_answers_path(config.actor_rollout_ref.rollout.get("custom", None))
    if path is None:
        return None
    try:
        return load_script(path)
    except ValueError as exc:
        raise ValueError(f"{CONFIG_KEY}: {exc}") from exc


def known_answers_path(custom: Any) -> str | None:
    """The script path in verl's ``rollout.custom`` (``known_answers``), or None."""
    if not custom:
        return None
    value = custom.get("known_answers") if hasattr(custom, "get") else None
    return str(value) if value else None


@dataclass
class _Entry:
    prompt: str
    responses: list[str]


class KnownAnswers:
    """The rollout server's side: match a prompt to its task and hand out its responses as token ids.

    Args:
        script: a :func:`build_known_answers` script.
        tokenizer: the model's tokenizer (prompt ids are decoded with it, responses encoded).

    Raises:
        ValueError: for a malformed script (:func:`validate_script`).
    """

    def __init__(self, script: dict[str, Any], tokenizer: Any) -> None:
        validate_script(script)
        # longest prompts first: a prompt that contains another task's prompt must match itself
        self.entries = sorted(
            (_Entry(t["prompt"], list(t["responses"])) for t in script["tasks"]), key=lambda e: -len(e.prompt)
        )
        self.tokenizer = tokenizer
        self.eos = tokenizer.eos_token_id

    @classmethod
    def load(cls, path: str | Path, tokenizer: Any) -> KnownAnswers:
        """Read a script file.

        Raises:
            ValueError: naming the file (and the task) when it is not a readable, well-formed script.
        """
        return cls(load_script(path), tokenizer)

    def match(self, prompt_ids: Sequence[int]) -> _Entry | None:
        """The task whose prompt the rendered prompt contains, or None."""
        text = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        for entry in self.entries:
            if entry.prompt in text:
                return entry
        return None

    def response_ids(self, entry: _Entry, k: int, max_tokens: int) -> list[int]:
        """Token ids of the ``k``-th rollout's response, ending with end-of-sequence, cut at ``max_tokens``."""
        text = entry.responses[k % len(entry.responses)]
        ids = list(self.tokenizer.encode(text, add_special_tokens=False)) + [self.eos]
        if len(ids) > max_tokens:
            logger.warning("known answer of %d tokens cut to the response budget %d", len(ids), max_tokens)
        return ids[:max_tokens]


def teacher_forced_log_probs(model: Any, prompt_ids: list[int], response_ids: list[int], temperature: float):
    """Log-probabilities of ``response_ids`` after ``prompt_ids`` under ``model`` (at ``temperature``; 0 = 1)."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([prompt_ids + response_ids], dtype=torch.long)
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        scale = temperature if temperature > 0 and math.isfinite(temperature) else 1.0
        logp = torch.log_softmax(logits / scale, dim=-1)
        return logp.gather(-1, torch.tensor(response_ids).unsqueeze(-1)).squeeze(-1).tolist()


def main(argv: list[str] | None = None) -> None:
    """Command line: write the known-answer script of a prepared parquet."""
    import pyarrow.parquet as pq

    from bots_verl.data.guru_fixture import code_solution

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="prepared parquet (bots_verl.data.guru output)")
    parser.add_argument("--out", required=True, help="script file (JSON)")
    parser.add_argument("--no-check", action="store_true", help="do not score the scripted responses first")
    args = parser.parse_args(argv)
    rows = pq.read_table(args.data).to_pylist()
    script = build_known_answers(rows, solution_for=code_solution)
    if not args.no_check:
        check_script(script, rows)
    Path(args.out).write_text(json.dumps(script, indent=1), encoding="utf-8")
    print(f"{args.out}: {len(script['tasks'])} tasks")


if __name__ == "__main__":
    main()
