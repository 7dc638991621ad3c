"""The code reward runs a program once per task and process: a repeated program (a group's rollouts repeat them) gets
the verdict of its first run, which a sandbox decided; a timeout or an error is run again (the machine may have caused
it), and another task's tests or limits run it again."""

from __future__ import annotations

import json

import pytest

from bots_verl.rewards import code_reward, compute_score

TESTS = json.dumps({"fn_name": "f", "inputs": [[1], [-3]], "outputs": [[4], [0]]})
OTHER_TESTS = json.dumps({"fn_name": "f", "inputs": [[1], [-3]], "outputs": [[4], [1]]})


def _code(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture
def sandbox_runs(monkeypatch, sandbox: str) -> list[str]:
    """Every program that reached a real sandbox (the reward's own runner, counted), from an empty verdict store."""
    runs: list[str] = []
    real = code_reward.score_local

    def counted(code, *args, **kwargs):
        runs.append(code)
        return real(code, *args, **kwargs)

    monkeypatch.setattr(code_reward, "score_local", counted)
    monkeypatch.setattr(code_reward, "_verdicts", type(code_reward._verdicts)())
    return runs


def test_a_repeated_program_runs_once_per_task(sandbox_runs):
    right, wrong = _code("f=lambda x:x+3"), _code("f=lambda x:x*4")
    verdicts = [compute_score("codegen__toy", r, TESTS)["acc"] for r in (right, right, wrong, right, wrong)]
    assert verdicts == [True, True, False, True, False]
    assert len(sandbox_runs) == 2
    # the same program under other tests is another question
    assert compute_score("codegen__toy", right, OTHER_TESTS)["acc"] is False
    assert len(sandbox_runs) == 3
    # and so under other limits
    compute_score("codegen__toy", right, TESTS, timeout_s=5)
    assert len(sandbox_runs) == 4


def test_a_timeout_is_run_again(sandbox_runs):
    spin = _code("def f(x):\n    while True:\n        pass")
    for _ in range(2):
        result = compute_score("codegen__toy", spin, TESTS, timeout_s=1)
        assert (result["acc"], result["status"]) == (False, "timeout")
    assert len(sandbox_runs) == 2


def test_the_store_is_bounded(sandbox_runs, monkeypatch):
    monkeypatch.setattr(code_reward, "_VERDICTS_MAX", 2)
    programs = [_code(f"f=lambda x:x+{k}") for k in (1, 2, 3)]
    for program in programs + programs[:1]:
        compute_score("codegen__toy", program, TESTS)
    assert len(code_reward._verdicts) == 2
    assert len(sandbox_runs) == 4  # the first program was dropped, so it ran again
