"""``python vllm_reload.py MODEL_DIR``: vLLM (CPU build) loads a model, then reloads halved weights into it the way
verl's weight sync does (the model's ``load_weights``, then ``process_weights_after_loading``); prints the greedy
tokens before and after as JSON. A reload that took effect changes them. Run by ``test_vllm_rollout_on_cpu.py``."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def _reload(worker, path: str) -> None:
    import torch
    from safetensors.torch import load_file
    from vllm.model_executor.model_loader.utils import process_weights_after_loading

    model = worker.model_runner.model
    weights = {k: v * 0.5 if v.ndim == 2 else v for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    model.load_weights(weights.items())
    process_weights_after_loading(model, worker.model_runner.vllm_config.model_config, torch.device("cpu"))


def main(path: str) -> None:
    from vllm import LLM, SamplingParams

    llm = LLM(model=path, dtype="float32", enforce_eager=True, max_model_len=64, seed=0)
    greedy = SamplingParams(temperature=0, max_tokens=4)
    prompt = {"prompt_token_ids": [1, 5, 6]}
    before = list(llm.generate(prompt, greedy)[0].outputs[0].token_ids)
    llm.collective_rpc(_reload, args=(path,))
    after = list(llm.generate(prompt, greedy)[0].outputs[0].token_ids)
    print(json.dumps({"before": before, "after": after}))


if __name__ == "__main__":
    main(sys.argv[1])
