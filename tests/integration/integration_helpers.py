"""Helpers of the integration tests (one home; fixtures live in ``conftest.py``).

Hydra composition as ``python -m bots_verl.main`` does it, verl-format parquet pools, trajectories written to
TransferQueue the way verl's agent loop writes them, and running ``python -m bots_verl.main`` on the CPU backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[2]


def make_pool(path, n: int, *, seed: int = 0, id_offset: int = 1000, shuffle: bool = True) -> pd.DataFrame:
    """A verl-format (gsm8k schema) parquet with stable task ids in extra_info.index and two reference columns."""
    rng = np.random.default_rng(seed)
    ids = id_offset + np.arange(n)
    order = rng.permutation(n) if shuffle else np.arange(n)
    weak = rng.uniform(0, 1, n)
    rows = []
    for j in order:
        a, b = int(j % 50), int(j // 50)
        rows.append(
            {
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": f"what is {a} plus {b} ?"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": "train", "index": int(ids[j])},
                "task_id": f"t{ids[j]}",
                "weak_pass_rate": float(weak[j]),
                "strong_pass_rate": float(min(1.0, weak[j] + 0.2)),
            }
        )
    frame = pd.DataFrame(rows)
    frame.to_parquet(path)
    return frame


def compose(overrides: list[str]):
    """Compose bots_trainer.yaml with hydra, as ``python -m bots_verl.main`` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="bots_verl.config", version_base=None):
        return hydra_compose(config_name="bots_trainer", overrides=overrides)


def base_overrides(train: str, tokenizer: str, *extra: str) -> list[str]:
    return [
        f"data.train_files={train}",
        f"data.val_files={train}",
        f"actor_rollout_ref.model.path={tokenizer}",
        "data.train_batch_size=4",
        "data.max_prompt_length=64",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=1",
        "trainer.logger=[console]",
        "bots.reference_columns=[weak_pass_rate,strong_pass_rate]",
        f"bots.actor.name=test_{uuid.uuid4().hex[:8]}",
        *extra,
    ]


def put_trajectories(
    prompts: list[dict],
    successes: list[list[float]],
    *,
    scores=None,
    outputs_per_session: int = 1,
    extra=None,
    output_score=None,
    partition_id: str = "train",
) -> tuple[list[str], list[dict]]:
    """Write trajectories to TransferQueue the way verl's AgentLoopWorkerTQ does (key uid_session_output).

    ``prompts``: per prompt its dataset fields (uid, index, extra_info, ...); ``successes[i][s]``: the reward of
    session s of prompt i; ``output_score(i, s, o, score)``, if given, the reward of output o of that session (as a
    colocated reward model scoring every output row would give). Stands in for the GPU rollout + reward.
    """
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, fields, tags = [], [], []
    for i, prompt in enumerate(prompts):
        for s, value in enumerate(successes[i]):
            score = value if scores is None else scores[i][s]
            info = {"acc": bool(value > 0)} if extra is None else extra(i, s, value)
            for o in range(outputs_per_session):
                # the response decides the reward, as with a real reward function
                p, r = torch.tensor([3, 4, 5]), torch.tensor([6, 8 if value > 0 else 7])
                rm = torch.zeros(2)
                rm[-1] = score if output_score is None else output_score(i, s, o, score)
                keys.append(f"{prompt['uid']}_{s}_{o}")
                field = {
                    **prompt,
                    "session_id": s,
                    "prompts": p,
                    "responses": r,
                    "response_mask": torch.ones(2, dtype=torch.int64),
                    "input_ids": torch.cat([p, r]),
                    "position_ids": torch.arange(5),
                    "rm_scores": rm,
                    "extra_fields": {"reward_extra_info": info, "num_turns": 2},
                }
                fields.append(field)
                tags.append({"status": "success", "prompt_len": 3, "response_len": 2, "seq_len": 5, "global_steps": 1})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags, partition_id=partition_id)
    return keys, tags


def save_bots_data_pt(folder, num_tasks: int, fingerprint: dict | None, *, selector: str = "bots", refs: int = 2):
    """A real ``data.pt`` (a ``StatefulDataLoader`` state with a :class:`BOTSSampler` posterior, ``torch.save``'d as
    verl's checkpoint writes it) in ``folder``, with its posterior service in this process instead of a Ray actor."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from bots_verl.core.settings import SelectorSettings
    from bots_verl.integration.transport.sampler import BOTSSampler
    from bots_verl.integration.transport.selector_client import InProcessSelectorClient
    from bots_verl.integration.transport.selector_service import SelectorService

    reference = np.full((num_tasks, refs), 0.5) if refs else None
    service = SelectorService(SelectorSettings(selector, seed=1), num_tasks, reference_pass_rates=reference)
    sampler = BOTSSampler(InProcessSelectorClient(service), num_tasks, 2, list(range(num_tasks)), fingerprint)
    loader = StatefulDataLoader(list(range(num_tasks)), batch_size=2, sampler=sampler)
    next(iter(loader))
    os.makedirs(folder, exist_ok=True)
    torch.save(loader.state_dict(), os.path.join(folder, "data.pt"))


# ------------------------------------------------------------------------------------------------- real runs
TRAIN_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": ""}


def train_env(attach: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of a training subprocess: this tree first on the path, one BLAS thread per process; a Ray cluster
    of its own, or the one ``attach`` names (the ``ray_attach`` fixture's environment)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **TRAIN_ENV, "PYTHONPATH": path, **(attach or {})}


def run_python(
    args: list[str], cwd, timeout: float = 900, attach: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python <args>`` in ``cwd`` with :func:`train_env`; output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=train_env(attach), capture_output=True, text=True, timeout=timeout
    )


def run_main(
    overrides: list[str], cwd, timeout: float = 900, attach: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m bots_verl.main <overrides>`` in ``cwd`` (attached to the cluster ``attach`` names, if given)."""
    return run_python(["-m", "bots_verl.main", *overrides], cwd, timeout, attach)


def read_metrics(run_dir) -> dict[int, dict]:
    """``{step: metrics}`` from a run log (later lines of a step win, as for resumed runs)."""
    from bots_verl.runlog import iter_metrics

    return {step: data for step, data in iter_metrics(run_dir)}


def tail(proc: subprocess.CompletedProcess, chars: int = 4000) -> str:
    """The end of a finished process's output, for assertion messages."""
    return (proc.stdout + proc.stderr)[-chars:]
