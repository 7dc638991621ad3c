"""The generation-batch cap of a step (``algorithm.filter_groups.max_num_gen_batches``): counting, config, dry run.

The real fit on a pool whose groups all come back all-0 is in ``test_e2e_on_cpu.py`` (it resumes DAPO run D's
checkpoint).
"""

from __future__ import annotations

import logging

import pytest
from integration_helpers import base_overrides, compose

from bots_verl.integration.safety.refill_cap import KEY, RefillCap, TooManyGenBatchesError, read_refill_cap
from bots_verl.main import _summary, check_config

DAPO = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=acc")


def test_a_step_may_dispatch_its_cap_in_train_batch_size_units_and_not_one_prompt_more():
    cap = RefillCap(max_gen_batches=2, train_batch_size=4)
    assert cap.max_prompts == 8
    # batch 1 (the step's first dispatch) and one refill up to the end of batch 2 pass, in any split
    cap.check(step=3, dispatched=4, asked=4)
    cap.check(step=3, dispatched=7, asked=1)
    with pytest.raises(TooManyGenBatchesError) as refused:
        cap.check(step=3, dispatched=8, asked=1)
    message = str(refused.value)
    assert f"{KEY}=2" in message and "step 3 dispatched 8 prompts" in message and "2 generation batches" in message
    assert "resume from the last checkpoint" in message and "set it to 0 for endless trials" in message
    # a refill that crosses the cap is refused whole: verl counts a refill as dispatched once it asked for it
    with pytest.raises(TooManyGenBatchesError, match="step 1 dispatched 6 prompts"):
        cap.check(step=1, dispatched=6, asked=4)
    assert isinstance(refused.value, ValueError)  # what verl's DAPO recipe raises


@pytest.mark.parametrize("value", [0, -1])
def test_zero_or_less_is_no_cap_as_in_verl(value):
    cap = RefillCap(max_gen_batches=value, train_batch_size=4)
    assert cap.max_prompts is None
    cap.check(step=1, dispatched=10**6, asked=10**6)
    assert "no cap" in cap.describe() and "refills for ever" in cap.describe()


def test_a_started_batch_counts():
    cap = RefillCap(max_gen_batches=3, train_batch_size=4)
    assert [cap.gen_batches(d) for d in (4, 5, 8, 9)] == [1, 2, 2, 3]


@pytest.mark.parametrize("value", ["true", "'10'", "10.0", "ten"])
def test_a_value_that_is_not_an_integer_is_refused_before_ray_naming_the_key(pool, tokenizer_dir, value):
    cfg = compose(base_overrides(pool, tokenizer_dir, *DAPO, f"algorithm.filter_groups.max_num_gen_batches={value}"))
    with pytest.raises(ValueError, match=f"{KEY}=.*must be an integer"):
        check_config(cfg)


@pytest.mark.parametrize(
    "extra, line",
    [
        (
            (*DAPO, "algorithm.filter_groups.max_num_gen_batches=10"),
            "refills (algorithm.filter_groups): algorithm.filter_groups.max_num_gen_batches=10: at most 10 generation "
            "batches (10 x train_batch_size = 40 prompts) per step, then the run stops",
        ),
        (DAPO, "no cap: a pool whose groups are all-0/all-1 (or all fail) refills for ever"),
        (
            ("trainer.v1.sampler.sync_refill_failed_groups=true", "algorithm.filter_groups.max_num_gen_batches=3"),
            "refills (trainer.v1.sampler.sync_refill_failed_groups): algorithm.filter_groups.max_num_gen_batches=3: "
            "at most 3 generation batches",
        ),
    ],
)
def test_the_dry_run_says_what_a_pool_of_discarded_groups_does_to_a_step(pool, tokenizer_dir, caplog, extra, line):
    caplog.set_level(logging.INFO, logger="bots_verl.main")
    cfg = compose(base_overrides(pool, tokenizer_dir, *extra, "bots.dry_run=true"))
    bots = check_config(cfg)
    assert line in _summary(cfg, bots)
    assert line.split(": ", 1)[1] in caplog.text  # also in the log of a real run


def test_without_refills_the_dry_run_says_nothing_of_them(pool, tokenizer_dir):
    cfg = compose(base_overrides(pool, tokenizer_dir, "bots.dry_run=true"))
    assert "refills (" not in _summary(cfg, check_config(cfg))
    assert read_refill_cap(cfg) == RefillCap(0, 4)  # verl's default: 0
