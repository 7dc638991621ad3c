"""``python vllm_reload.py MODEL_DIR``: vLLM (CPU build) loads a model, then reloads halved weights into it the way
verl's weight sync does (the model's ``load_weights``, then ``process_weights_after_loading``); prints, as JSON, vLLM's
greedy tokens before and after, and the greedy tokens of a transformers model holding the original weights and one
holding the halved weights (the references). A reload that took the new weights, whole and unchanged, makes vLLM's
tokens after equal the halved reference's. Run by ``test_vllm_rollout_on_cpu.py``."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

PROMPT = [1, 5, 6]
TOKENS = 4


def halved(path: str) -> dict:
    """The model file's weights with every matrix halved (vectors, the norms, kept): the weights reloaded."""
    from safetensors.torch import load_file

    return {k: v * 0.5 if v.ndim == 2 else v for k, v in load_file(os.path.join(path, "model.safetensors")).items()}


def _reload(worker, path: str) -> None:
    import torch
    from vllm.model_executor.model_loader.utils import process_weights_after_loading

    model = worker.model_runner.model
    model.load_weights(halved(path).items())
    process_weights_after_loading(model, worker.model_runner.vllm_config.model_config, torch.device("cpu"))


def reference_greedy(path: str, weights: dict | None = None) -> list[int]:
    """``TOKENS`` greedy tokens after ``PROMPT`` from transformers' own model of ``path``, holding ``weights`` (the
    file's when None), in float32, end-of-sequence ignored as in the vLLM request."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if weights is not None:
        missing, unexpected = model.load_state_dict(weights, strict=False)
        # a tied output layer has no entry of its own in the file: it is the embedding, loaded above
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise RuntimeError(f"reference load: missing {missing}, unexpected {unexpected}")
    model.eval()
    ids = list(PROMPT)
    with torch.no_grad():
        for _ in range(TOKENS):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(PROMPT) :]


def main(path: str) -> None:
    from vllm import LLM, SamplingParams

    llm = LLM(model=path, dtype="float32", enforce_eager=True, max_model_len=64, seed=0)
    greedy = SamplingParams(temperature=0, max_tokens=TOKENS, ignore_eos=True)
    prompt = {"prompt_token_ids": PROMPT}
    before = list(llm.generate(prompt, greedy)[0].outputs[0].token_ids)
    llm.collective_rpc(_reload, args=(path,))
    after = list(llm.generate(prompt, greedy)[0].outputs[0].token_ids)
    out = {"before": before, "after": after}
    out.update(reference_before=reference_greedy(path), reference_after=reference_greedy(path, halved(path)))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
