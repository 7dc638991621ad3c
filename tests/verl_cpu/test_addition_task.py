"""The CPU backend's toy task: what the benchmark's plain-torch floor assumes about its prompts."""

from __future__ import annotations

from bots_verl.verl_cpu.addition_task import QUESTION, prompt_length


def test_prompt_length_is_the_rendered_prompt_length(toy_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(toy_model_dir)
    for a, b in ((0, 0), (9, 9), (3, 7)):
        messages = [{"role": "user", "content": QUESTION.format(a=a, b=b)}]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        assert len(ids) == prompt_length()
        assert tokenizer.unk_token_id not in ids
