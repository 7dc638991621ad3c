"""What the canonical row order costs the driver per step, at GPU-scale shapes, measured on CPU.

Run as ``python -m bots_verl.speed.canonical_order_cost [--prompts 512 --n 16 --tokens 4096]``.
:func:`~bots_verl.integration.hooks.canonical_order.canonical_order` reads every response of the step from TransferQueue
(``prompts * n * tokens`` int64 tokens) and sorts the rows by them; with a vLLM/SGLang rollout the replay buffer
skips it and keeps verl's metadata-only batch (:mod:`bots_verl.integration.hooks.replay_buffer`). This prints both per
step. TransferQueue is replaced by an in-memory tensor, so the transfer itself (the bytes printed) is not in the
sorted figure: the real cost is higher by the time to move those bytes to the driver.
"""

from __future__ import annotations

import argparse
import logging
import time
from unittest import mock

import numpy as np

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    """Benchmark entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--n", type=int, default=16, help="rollouts per prompt")
    parser.add_argument("--tokens", type=int, default=4096, help="response length (padded)")
    parser.add_argument("--vocab", type=int, default=151_936, help="token ids are drawn below this (Qwen2.5's)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch
    import transfer_queue
    from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from bots_verl.integration.hooks.canonical_order import canonical_order
    from bots_verl.integration.hooks.replay_buffer import adopt_replay_buffer

    rows = args.prompts * args.n
    rng = np.random.default_rng(0)
    responses = torch.from_numpy(rng.integers(0, args.vocab, size=(rows, args.tokens), dtype=np.int64))
    uids = [f"{i:032x}" for i in rng.permutation(args.prompts)]
    keys = [f"{uid}_{s}_0" for uid in uids for s in rng.permutation(args.n)]  # arrival order
    tags = [{"status": "success"} for _ in keys]
    dispatch = {uid: i for i, uid in enumerate(sorted(uids))}

    def fetch(keys, partition_id, select_fields):
        return {"responses": responses}

    def timed(fn) -> float:
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return best

    with mock.patch.object(transfer_queue, "kv_batch_get", fetch):
        sort_s = timed(lambda: canonical_order(keys, tags, "train", dispatch))

    buffer = adopt_replay_buffer(
        ReplayBuffer(
            trainer_mode="sync",
            trainer_config={},
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            sampler_kwargs={},
        ),
        dispatch_order=dispatch,
        poll_interval=None,
        canonical=False,
        observer=None,
    )
    snapshot = dict(zip(keys, tags, strict=True))
    with mock.patch.object(verl_replay_buffer, "tq", mock.Mock()):
        meta_s = timed(lambda: buffer._materialize_batch("train", uids, snapshot))

    mb = responses.numel() * responses.element_size() / 2**20
    print(
        f"canonical order, {args.prompts} prompts x {args.n} rollouts x {args.tokens} tokens ({rows} rows): "
        f"{mb:.0f} MiB of response tokens read per step, {sort_s:.2f} s to sort them on the driver (best of "
        f"{args.repeats}, transfer excluded); vLLM/SGLang path (metadata only, no tokens read): {meta_s * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
