"""Supervised warm-up of a tiny model on CPU: the starting policy and the reference models.

Plain next-token cross-entropy on the response (answer and ``</s>``) of problems streamed from a cell mixture
(:class:`bots_verl.toy.tasks.ProblemStream`), AdamW with linear warm-up and cosine decay. Everything that decides the
weights is fixed by :class:`WarmupSpec`: the initial weights (``init_seed``), the data order (``data_seed``), and the
thread count (float summation order depends on it, so a different count gives slightly different weights). The same
spec gives bitwise the same model on the same machine.

The result is saved as a transformers model directory (weights, config, generation config, the char tokenizer) plus
``warmup.json`` (the spec, loss curve, wall-clock and CPU seconds), written to a temporary directory and renamed into
place, so an interrupted warm-up leaves nothing that looks finished.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bots_verl.fileio import publishing
from bots_verl.toy.families import family_of
from bots_verl.toy.likelihood import pad_batch
from bots_verl.toy.model import ModelSpec, build_model, count_parameters
from bots_verl.toy.tasks import Problem
from bots_verl.toy.tokenizer import build_tokenizer, vocab_of

logger = logging.getLogger(__name__)

__all__ = ["WarmupSpec", "WarmupTargetError", "is_done", "read_result", "train_warmup"]

RESULT_FILE = "warmup.json"


class WarmupTargetError(RuntimeError):
    """A warm-up with ``stop_at`` did not reach it within ``max_steps``."""


@dataclass(frozen=True)
class WarmupSpec:
    """Everything that determines a warmed-up model.

    Attributes:
        model: the architecture.
        mixture: cell name (``add2x3``) -> relative weight of the warm-up data.
        steps: optimiser steps; with ``stop_at``, the length of the learning-rate schedule (the warm-up stops where
            its target is reached, before or after it; after it the rate stays at its floor).
        batch_size: problems per step.
        lr: peak learning rate.
        warmup_steps: linear warm-up steps before the cosine decay (to 10% of ``lr``).
        weight_decay: AdamW weight decay.
        init_seed: fixes the initial weights.
        data_seed: fixes the warm-up data and its order.
        threads: torch intra-op threads (part of the spec because it changes the float summation order).
        slip: share of warm-up responses that open with a stray ``=`` (``=46</s>``), a format slip the scorer
            rejects; the answer follows it, so the policy learns the arithmetic in both branches. Such a policy
            knows answers it often fails to deliver, the regime of an LLM whose pass@1 is far below its pass@k:
            GRPO can learn one behaviour that transfers to every task, which the toy's memorised arithmetic alone
            does not offer (``recipes/toy/results/calibration.md``). The code and logic families slip in their own
            way (:class:`~bots_verl.toy.families.TaskFamily`).
        family: the task family (:mod:`bots_verl.toy.families`): its cells name the mixture, its tokenizer and
            problems are trained on.
        stop_at: stop at the first check where the model's mean exact pass rate on the probe tasks (the build's
            pool: :func:`train_warmup`'s ``probe``) reaches this; None: train ``steps``. The code and logic families
            stop this way, since their curves are steep where they stop and move with the seed (families.md).
        check_every: steps between checks of ``stop_at``.
        max_steps: with ``stop_at``: a warm-up that has not reached it after these steps fails (naming how far it
            got) rather than leave a model short of its place.
    """

    model: ModelSpec
    mixture: Mapping[str, float]
    steps: int
    batch_size: int = 128
    lr: float = 2e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    init_seed: int = 0
    data_seed: int = 0
    threads: int = 1
    slip: float = 0.0
    family: str = "arith"
    stop_at: float | None = None
    check_every: int = 5
    max_steps: int | None = None
    _cells: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.threads < 1:
            raise ValueError(f"steps, batch_size and threads must be positive: {self}")
        if not 0.0 <= self.slip < 1.0:
            raise ValueError(f"slip must be in [0, 1): {self}")
        if not (self.lr > 0 and math.isfinite(self.lr)) or self.warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError(f"lr must be positive, warmup_steps and weight_decay non-negative: {self}")
        if self.stop_at is not None:
            if not 0.0 < self.stop_at < 1.0:
                raise ValueError(f"stop_at must be in (0, 1): {self}")
            if self.check_every < 1 or self.max_steps is None or self.max_steps < self.steps:
                raise ValueError(f"with stop_at: check_every >= 1 and max_steps >= steps: {self}")
        elif self.max_steps is not None:
            raise ValueError(f"max_steps without stop_at (steps is the warm-up's length then): {self}")
        fam = family_of(self.family)  # an unknown family or a cell of another family raises ValueError here
        object.__setattr__(self, "_cells", tuple(fam.cell_from_name(name) for name in self.mixture))

    @property
    def cell_weights(self) -> dict[Any, float]:
        """The mixture keyed by the family's cells."""
        return {cell: float(self.mixture[cell.name]) for cell in self._cells}

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-ready dict (what ``warmup.json`` stores and compares)."""
        out = asdict(self)
        out.pop("_cells", None)
        if not self.slip:
            out.pop("slip")  # specs from before the field existed stay equal to theirs
        if self.family == "arith":
            out.pop("family")  # likewise: every arithmetic build's spec is unchanged
        if self.stop_at is None:
            for name in ("stop_at", "check_every", "max_steps"):
                out.pop(name)  # likewise
        out["mixture"] = {k: float(v) for k, v in sorted(self.mixture.items())}
        return out


def _lr_at(step: int, spec: WarmupSpec) -> float:
    if step < spec.warmup_steps:
        return spec.lr * (step + 1) / spec.warmup_steps
    progress = (step - spec.warmup_steps) / max(1, spec.steps - spec.warmup_steps)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))


def read_result(out_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The ``warmup.json`` of a finished warm-up, or ``None``."""
    path = Path(out_dir) / RESULT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def is_done(out_dir: str | os.PathLike, spec: WarmupSpec) -> bool:
    """Whether ``out_dir`` holds a finished warm-up of exactly ``spec``.

    Raises:
        ValueError: if it holds a finished warm-up of another spec (delete it or choose another directory; an
            artifact is never silently replaced).
    """
    result = read_result(out_dir)
    if result is None:
        return False
    if result.get("spec") != json.loads(json.dumps(spec.to_dict())):
        raise ValueError(
            f"{out_dir} holds a warm-up of another spec ({result.get('spec')}); delete it or use another --out"
        )
    return True


def train_warmup(
    spec: WarmupSpec,
    out_dir: str | os.PathLike,
    exclude: Iterable[str] = (),
    log_every: int = 50,
    probe: Sequence[str] = (),
) -> dict[str, Any]:
    """Train a model from scratch by supervised warm-up and save it (skipped when ``out_dir`` already holds it).

    Args:
        spec: what to train.
        out_dir: the model directory to write.
        exclude: prompts the warm-up data must not contain (the held-out set and the training pool; see
            :class:`~bots_verl.toy.tasks.ProblemStream` for the one-digit exception).
        log_every: steps between loss log lines.
        probe: prompts whose mean exact pass rate ``spec.stop_at`` is checked on (the build's pool; none are
            trained on: they are in ``exclude``).

    Returns:
        The contents of ``warmup.json`` (with ``stop_at``: the step it stopped at and each check's pass rate).

    Raises:
        ValueError: ``stop_at`` without probe prompts; another spec's warm-up in ``out_dir``.
        WarmupTargetError: ``stop_at`` not reached within ``max_steps``.
    """
    import torch

    out = Path(out_dir)
    if is_done(out, spec):
        logger.info("warm-up %s already done; skipped", out)
        return read_result(out)  # type: ignore[return-value]
    if out.exists():
        # A warm-up only ever appears by renaming a finished temporary directory, so this is not one of ours.
        raise ValueError(f"{out} exists but holds no finished warm-up; delete it or use another directory")
    if spec.stop_at is not None and not probe:
        raise ValueError(f"{out}: a warm-up that stops at a pass rate needs the prompts it is checked on")
    threads = torch.get_num_threads()
    torch.set_num_threads(spec.threads)
    try:
        return _train(spec, out, exclude, log_every, probe)
    finally:
        torch.set_num_threads(threads)


class _Response(NamedTuple):
    """A warm-up example whose response differs from the problem's answer."""

    prompt: str
    answer: str


def _with_slips(
    problems: list[Problem], share: float, rng: random.Random, family: str = "arith"
) -> list[Problem | _Response]:
    """``problems`` with the family's format slip (arithmetic: a stray ``=`` before the answer) in about ``share``
    of them (none when ``share`` is 0)."""
    if not share:
        return list(problems)
    slip = family_of(family).slip
    return [_Response(p.prompt, slip(p.answer)) if rng.random() < share else p for p in problems]


def _train(spec: WarmupSpec, out: Path, exclude: Iterable[str], log_every: int, probe: Sequence[str]) -> dict[str, Any]:
    import torch

    from bots_verl.toy.likelihood import answer_stats

    wall0, cpu0 = time.monotonic(), time.process_time()
    stream = family_of(spec.family).stream(spec.mixture, seed=spec.data_seed, exclude=exclude)
    vocab = vocab_of(spec.family)
    model = build_model(spec.model, seed=spec.init_seed, vocab=vocab)
    model.train()
    slips = random.Random(f"slip-{spec.data_seed}")  # its own stream: slip 0 leaves the data as it was
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=spec.lr,
        betas=(0.9, 0.98),
    )
    losses: list[tuple[int, float]] = []
    running = 0.0
    probe_tasks = [family_of(spec.family).parse_prompt(prompt) for prompt in probe]
    checks: list[tuple[int, float]] = []
    last = spec.steps if spec.stop_at is None else spec.max_steps
    assert last is not None  # WarmupSpec: stop_at comes with max_steps
    for step in range(last):
        for group in optim.param_groups:
            group["lr"] = _lr_at(step, spec)
        batch = _with_slips(stream.take(spec.batch_size), spec.slip, slips, spec.family)
        input_ids, mask, labels = pad_batch(batch, vocab)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        running += float(loss.detach())
        # a check is a forward pass without gradients in eval mode: it changes nothing the training reads
        reached = False
        if spec.stop_at is not None and (step + 1) % spec.check_every == 0:
            checks.append((step + 1, float(np.mean(answer_stats(model, probe_tasks, vocab=vocab)[0]))))
            reached = checks[-1][1] >= spec.stop_at
            logger.info(
                "%s step %d: pool pass rate %.4f (stops at %s)", out.name, step + 1, checks[-1][1], spec.stop_at
            )
        if (step + 1) % log_every == 0 or step + 1 == spec.steps or reached:
            n = (step % log_every) + 1
            losses.append((step + 1, running / n))
            logger.info("%s step %d/%d loss %.4f", out.name, step + 1, spec.steps, running / n)
            running = 0.0
        if reached:
            break
    else:
        if spec.stop_at is not None:
            best = max(checks, key=lambda c: c[1])
            raise WarmupTargetError(
                f"{out.name}: the warm-up did not reach a pool pass rate of {spec.stop_at} in {last} steps (highest "
                f"{best[1]:.4f} at step {best[0]}); nothing was written. Its curve is the seed's: try another --seed, "
                "or raise max_steps in the profile"
            )
    result = {
        "spec": spec.to_dict(),
        "parameters": count_parameters(model),
        "loss": losses,
        "wall_s": time.monotonic() - wall0,
        "cpu_s": time.process_time() - cpu0,
    }
    if spec.stop_at is not None:
        result["stopped_at"] = checks[-1][0]
        result["checks"] = checks
    with publishing(out) as tmp:
        model.save_pretrained(str(tmp))
        build_tokenizer(tmp, spec.family)
        (tmp / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
