"""The calibration probe: plain-torch GRPO on the toy artifacts, with verl's learning-rate schedule."""

from __future__ import annotations

import json

import pytest

from bots_verl.toy import probe


def test_warmup_factor_is_verls_constant_schedule_with_warmup() -> None:
    import torch
    from verl.utils.torch_functional import get_constant_schedule_with_warmup

    for warmup in (0, 1, 5):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = get_constant_schedule_with_warmup(optimizer, num_warmup_steps=warmup)
        verl_factors = [scheduler.lr_lambdas[0](step) for step in range(12)]
        assert [probe.warmup_factor(step, warmup) for step in range(12)] == verl_factors
    assert probe.warmup_factor(0, 5) == 0.0  # verl's first warm-up step does not move the weights


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    from bots_verl.toy.prepare import prepare

    out = tmp_path_factory.mktemp("probe_artifacts")
    prepare(out, seed=3, profile="ci", jobs=1)
    return out


def _args(data, out, **changes):
    argv = ["--data", str(data), "--out", str(out), "--seeds", "0", "1", "--steps", "2", "--eval-every", "1"]
    argv += ["--prompts", "4", "--n", "4", "--lr", "1e-3"]
    for key, value in changes.items():
        argv += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return argv


def test_a_probe_is_deterministic_resumable_and_learns_something(artifacts, tmp_path) -> None:
    assert probe.main(_args(artifacts, tmp_path / "a")) == 0
    (path,) = (tmp_path / "a").glob("*.json")
    first = json.loads(path.read_text())
    assert set(first["seeds"]) == {"0", "1"}
    for result in first["seeds"].values():
        assert set(result["accuracy"]) == {"0", "1", "2"}
        assert [s["step"] for s in result["steps"]] == [1, 2]
        # lr 1e-3 (AdamW's weight decay moves the weights even when every group is all-wrong)
        assert result["accuracy"]["2"] != result["accuracy"]["0"]
        assert all(len(set(s["tasks"])) == 4 for s in result["steps"])
        assert all(0.0 <= s["mixed"] <= 1.0 and s["grad_norm"] >= 0.0 for s in result["steps"])
    # the two seeds draw different tasks
    assert [s["tasks"] for s in first["seeds"]["0"]["steps"]] != [s["tasks"] for s in first["seeds"]["1"]["steps"]]
    # a rerun resumes: finished seeds are not trained again
    assert probe.main(_args(artifacts, tmp_path / "a")) == 0
    assert json.loads(path.read_text())["seeds"] == first["seeds"]
    # the same settings in another directory give the same curves
    assert probe.main(_args(artifacts, tmp_path / "b")) == 0
    again = json.loads(next((tmp_path / "b").glob("*.json")).read_text())
    for seed in ("0", "1"):
        assert again["seeds"][seed]["accuracy"] == first["seeds"][seed]["accuracy"]


def test_report_lists_every_probe_with_its_gain(tmp_path) -> None:
    def record(lr: float, gains: list[float]) -> dict:
        seeds = {
            str(i): {
                "accuracy": {"0": 0.2, "4": 0.2 + g},
                "pool_accuracy": {"0": 0.1, "4": 0.1},
                "steps": [{"mixed": 0.5}],
            }
            for i, g in enumerate(gains)
        }
        settings = {"prompts": 16, "n": 8, "lr": lr, "warmup_steps": 0, "loss_agg_mode": "token-mean", "steps": 4}
        return {"settings": {**settings, "optimizer": "SGD"}, "seeds": seeds}

    (tmp_path / "a.json").write_text(json.dumps(record(1e-4, [0.01, 0.03])))
    (tmp_path / "b.json").write_text(json.dumps(record(3e-5, [-0.02, -0.02])))
    table = probe.report(tmp_path).splitlines()
    assert len(table) == 4
    # sorted by rollouts per step, then learning rate: 3e-5 first
    assert "| 3e-05 |" in table[2] and "-0.0200" in table[2] and "| 0.2000 |" in table[2]
    assert "| 0.0001 |" in table[3] and "0.0200 [" in table[3] and "| SGD |" in table[3]
    assert "0.0000" in table[3]  # the pool did not move


def test_soften_divides_the_logits_by_the_temperature(artifacts) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(artifacts / "models" / "policy"), dtype=torch.float32)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        before = model(input_ids=ids).logits
        probe.soften(model, 1.5)
        after = model(input_ids=ids).logits
    torch.testing.assert_close(after, before / 1.5, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="positive"):
        probe.soften(model, 0.0)


def test_mini_batches_and_a_softened_start_change_the_run_and_its_name(artifacts, tmp_path) -> None:
    assert probe.main(_args(artifacts, tmp_path / "plain")) == 0
    assert probe.main(_args(artifacts, tmp_path / "mb", mini_batches=2, start_temperature=1.5)) == 0
    plain = json.loads(next((tmp_path / "plain").glob("*.json")).read_text())
    (path,) = (tmp_path / "mb").glob("*.json")
    assert path.name.endswith("_mb2_T1.5.json") and "_mb" not in next((tmp_path / "plain").glob("*.json")).name
    changed = json.loads(path.read_text())
    # the softened policy starts elsewhere (same tasks drawn: selection depends on the seed only)
    assert changed["seeds"]["0"]["accuracy"]["0"] != plain["seeds"]["0"]["accuracy"]["0"]
    assert [s["tasks"] for s in changed["seeds"]["0"]["steps"]] == [s["tasks"] for s in plain["seeds"]["0"]["steps"]]
    assert "| 2 | 1.5 |" in probe.report(tmp_path / "mb")
    with pytest.raises(SystemExit):
        probe.main(_args(artifacts, tmp_path / "bad", mini_batches=3))


def test_fixed_tasks_train_the_same_tasks_and_report_their_gain(artifacts, tmp_path) -> None:
    assert probe.main(_args(artifacts, tmp_path / "fixed", fixed_tasks=True)) == 0
    (path,) = (tmp_path / "fixed").glob("*_fixed.json")
    record = json.loads(path.read_text())
    for result in record["seeds"].values():
        assert {tuple(s["tasks"]) for s in result["steps"]} == {tuple(record["seeds"]["0"]["steps"][0]["tasks"])}
        assert set(result["trained_accuracy"]) == {"0", "1", "2"}
    row = probe.report(tmp_path / "fixed").splitlines()[2]
    assert row.count("[") == 3  # held-out, pool and trained-task gains, each with its interval
