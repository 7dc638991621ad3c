"""The char tokenizer: chat template, encode fast path, decoding, and verl's own prompt tokenisation."""

from __future__ import annotations

import pytest

from bots_verl.toy.tokenizer import VOCAB, build_tokenizer, encode


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(path)
    return AutoTokenizer.from_pretrained(str(path))


def test_template_renders_prompt_and_supervised_sequence(tokenizer) -> None:
    user = [{"role": "user", "content": "12*34"}]
    assert tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True) == "<s>12*34="
    full = [*user, {"role": "assistant", "content": "408"}]
    assert tokenizer.apply_chat_template(full, tokenize=False) == "<s>12*34=408</s>"
    with pytest.raises(Exception, match="user and assistant"):
        tokenizer.apply_chat_template([{"role": "system", "content": "x"}, *user], tokenize=False)


@pytest.mark.parametrize(("prompt", "answer"), [("0+0", "0"), ("12-345", "-333"), ("1234*5678", "7006652")])
def test_encode_matches_the_tokenizer(tokenizer, prompt: str, answer: str) -> None:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}], tokenize=False
    )
    ids, n_prompt = encode(prompt, answer)
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == ids
    assert ids[n_prompt - 1] == VOCAB["="] and ids[-1] == VOCAB["</s>"]
    assert tokenizer.decode(ids[n_prompt:], skip_special_tokens=True) == answer


def test_unknown_characters_become_unk_and_never_decode_as_digits(tokenizer) -> None:
    ids = tokenizer("4 x\u0664", add_special_tokens=False)["input_ids"]
    assert ids == [VOCAB["4"], VOCAB["<unk>"], VOCAB["<unk>"], VOCAB["<unk>"]]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "4"


def test_verl_builds_the_same_prompt_tokens(tokenizer) -> None:
    """verl's agent loop tokenises prompts with its Continuous Token builder: it must give our ids."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    builder = create_continuous_token_builder(tokenizer, hf_model_type="llama")
    assert builder.build_initial_tokens([{"role": "user", "content": "98-7"}]) == encode("98-7")[0]
