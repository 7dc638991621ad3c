"""Reading GURU's functional test code as call-based tests (literal forms only; anything else goes to the judge)."""

from __future__ import annotations

import json

import pytest

from bots_verl.rewards import compute_score
from bots_verl.rewards.code_tests import Call, functional_calls

LEETCODE = "def check(candidate):\n    assert candidate(nums=[3, 3], target=6) == [0, 1]\n\ncheck(Solution().twoSum)\n"
HUMANEVAL = 'def check(candidate):\n    """doc"""\n    assert candidate([1.0, 2.0], 0.5) == False\n\ncheck(close)\n'
LIVECODEBENCH = "def check_f():\n    assert Solution().f(3, 4) == 7\n    assert Solution().f(1, 1) == 2\n\ncheck_f()\n"
TACO = (
    "_inputs = [[1, 2], [3, 4]]\n_outputs = [[3], [7, 8]]\nimport math\n"
    "def _deep_eq(a, b, tol=1e-4):\n    return a == b\n\n"
    "for i, o in zip(_inputs, _outputs):\n    assert _deep_eq(Solution().add(*i), o[0] if len(o) == 1 else tuple(o))\n"
)


def test_literal_forms_become_calls() -> None:
    assert functional_calls(LEETCODE) == [Call("twoSum", [], {"nums": [3, 3], "target": 6}, [0, 1], via="shared")]
    assert functional_calls(HUMANEVAL) == [Call("close", [[1.0, 2.0], 0.5], {}, False, via="function")]
    assert functional_calls(LIVECODEBENCH) == [
        Call("f", [3, 4], {}, 7, via="fresh"),
        Call("f", [1, 1], {}, 2, via="fresh"),
    ]
    assert functional_calls(TACO) == [
        Call("add", [1, 2], {}, 3, 1e-4, "fresh"),
        Call("add", [3, 4], {}, [7, 8], 1e-4, "fresh"),
    ]


@pytest.mark.parametrize(
    "code",
    [
        "def check(candidate):\n    assert is_same_list(candidate(head=list_node([1])), list_node([1]))\n\ncheck(f)\n",
        "def check(candidate):\n    assert abs(candidate(1) - 0.5) < 1e-6\n\ncheck(f)\n",
        "def check(candidate):\n    x = candidate(1)\n    assert x == 1\n\ncheck(f)\n",
        "def check(candidate):\n    assert candidate(*[1, 2]) == 3\n\ncheck(f)\n",
        "def check(candidate):\n    assert candidate(__import__('os')) == 3\n\ncheck(f)\n",
        "def check(candidate):\n    pass\n\ncheck(f)\n",
        LEETCODE + "print('extra')\n",
        TACO.replace("tuple(o)", "list(o)"),
        "assert f() == 1\n",
        "def broken(:\n",
        "",
    ],
)
def test_anything_else_is_left_to_the_judge(code: str) -> None:
    assert functional_calls(code) is None


def test_instances_follow_the_test(sandbox: str) -> None:
    """check(Solution().f) shares one instance across asserts; Solution().f(...) makes a new one per call."""
    counter = (
        "class Solution:\n    def __init__(self):\n        self.n = 0\n"
        "    def f(self):\n        self.n += 1\n        return self.n"
    )
    shared = "def check(candidate):\n    assert candidate() == 1\n    assert candidate() == 2\n\ncheck(Solution().f)\n"
    fresh = "def check_f():\n    assert Solution().f() == 1\n    assert Solution().f() == 1\n\ncheck_f()\n"
    for test in (shared, fresh):
        assert functional_calls(test) is not None
        result = compute_score("codegen__x", f"```python\n{counter}\n```", json.dumps({"functional": test}))
        assert result["score"] == 1.0, test
