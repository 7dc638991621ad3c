"""Shared CPU fixtures: one local Ray + TransferQueue per session, a local tokenizer, parquet pools, hydra configs."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pandas as pd
import pytest
import torch


@pytest.fixture(scope="session")
def ray_tq():
    """Local Ray (started first: tq.init() on a small box hangs when it starts Ray itself) and TransferQueue."""
    import ray
    import transfer_queue as tq

    ray.init(num_cpus=4, include_dashboard=False, namespace="bots_tests", log_to_driver=False)
    tq.init()
    yield
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    """A WordLevel tokenizer built locally and saved as a transformers tokenizer (no hub access)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", "what", "is", "plus", "?", "user", "assistant"] + [str(i) for i in range(100)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}assistant"
    path = tmp_path_factory.mktemp("tok")
    fast.save_pretrained(path)
    return str(path)


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


@pytest.fixture()
def pool(tmp_path):
    path = tmp_path / "train.parquet"
    make_pool(path, 40)
    return str(path)


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
    prompts: list[dict], successes: list[list[float]], *, scores=None, outputs_per_session: int = 1, extra=None
) -> tuple[list[str], list[dict]]:
    """Write trajectories to TransferQueue the way verl's AgentLoopWorkerTQ does (key uid_session_output).

    ``prompts``: per prompt its dataset fields (uid, index, extra_info, ...); ``successes[i][s]``: the reward of
    session s of prompt i. Stands in for the GPU rollout + reward.
    """
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, fields, tags = [], [], []
    for i, prompt in enumerate(prompts):
        for s, value in enumerate(successes[i]):
            score = value if scores is None else scores[i][s]
            info = {"acc": bool(value > 0)} if extra is None else extra(i, s, value)
            for o in range(outputs_per_session):
                p, r = torch.tensor([3, 4, 5]), torch.tensor([6, 7])
                rm = torch.zeros(2)
                rm[-1] = score
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
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags, partition_id="train")
    return keys, tags


def dumps(x) -> str:
    return json.dumps(x, sort_keys=True, default=str)
