"""A response sampled several times for one task is scored once and counted as often as it was sampled: the
reference columns of the toy code family score each distinct program in one sandbox, not each sample."""

from __future__ import annotations

import pytest

from bots_verl.rewards import compute_score
from reference_eval.collect import _score_batch
from reference_eval.data import Task
from reference_eval.scoring import ScoreError, Scorer


class CountingScorer:
    """The training reward, counting its calls per response; raises on one response as a broken judge would."""

    def __init__(self, broken: str | None = None) -> None:
        self.calls: dict[str, int] = {}
        self.broken = broken

    def __call__(self, data_source, response, ground_truth, extra_info=None):
        self.calls[response] = self.calls.get(response, 0) + 1
        if response == self.broken:
            raise RuntimeError("judge unreachable")
        return compute_score(data_source, response, ground_truth, extra_info)


def _task(task_id: int, answer: str) -> Task:
    prompt = [{"role": "user", "content": f"question {task_id}"}]
    return Task(task_id, task_id, "math", prompt, answer, {"index": task_id}, f"sha{task_id}")


def test_each_distinct_response_is_scored_once_and_counted_as_sampled():
    fn = CountingScorer()
    right, wrong = "\\boxed{7}", "\\boxed{8}"
    outs = [[right, right, wrong, right, right, wrong], [right, wrong, wrong, wrong, wrong, wrong]]
    records = _score_batch(Scorer("tests:count", fn), [_task(1, "7"), _task(2, "8")], outs, 6, "raise", True)
    assert [r["successes"] for r in records] == [4, 5]
    assert [r["mean_score"] for r in records] == pytest.approx([4 / 6, 5 / 6])
    # two distinct responses per task, each scored once per task (the same text of another task is scored again)
    assert fn.calls == {right: 2, wrong: 2}
    assert records[0]["responses"] == outs[0]


def test_a_repeated_response_that_cannot_be_scored_counts_each_time():
    fn = CountingScorer(broken="\\boxed{?}")
    outs = [["\\boxed{?}", "\\boxed{7}", "\\boxed{?}", "\\boxed{?}"]]
    (record,) = _score_batch(Scorer("tests:count", fn), [_task(1, "7")], outs, 4, "fail", False)
    assert (record["score_errors"], record["successes"], record["mean_score"]) == (3, 1, 1.0)
    assert fn.calls["\\boxed{?}"] == 1
    with pytest.raises(ScoreError, match="judge unreachable"):
        _score_batch(Scorer("tests:count", fn), [_task(1, "7")], outs, 4, "raise", False)
