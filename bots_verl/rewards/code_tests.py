"""Reading GURU's functional test code as plain call-based tests, where it has one of GURU's literal forms.

Most functional tests in GURU are lists of calls with literal arguments and literal expected values, written in one
of three shapes (guru.md §2.3, Reasoning360 ``data_preprocess/codegen``):

- LeetCode / HumanEval: ``def check(candidate):`` with ``assert candidate(<literals>) == <literal>`` lines, then
  ``check(Solution().method)`` or ``check(function)``;
- LiveCodeBench: ``def check_f():`` with ``assert Solution().f(<literals>) == <literal>`` lines, then ``check_f()``;
- TACO / PrimeIntellect: ``_inputs = <literal>``, ``_outputs = <literal>``, a ``_deep_eq`` helper, and
  ``for i, o in zip(_inputs, _outputs): assert _deep_eq(fn(*i), <o, o[0], or o[0] if len(o) == 1 else tuple(o)>)``.

:func:`functional_calls` turns such code into :class:`Call` objects by reading the syntax tree (``ast.literal_eval``
only: nothing is executed), so the scorer can run them like call-based tests: one sandbox, the comparison in the
scorer's process. Any other test code returns ``None`` and runs in the judge sandbox instead
(:mod:`bots_verl.rewards._harness`), which handles arbitrary test code (linked-list and tree helpers, loops, ...).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from bots_verl.rewards.code_compare import FLOAT_TOL

__all__ = ["Call", "deep_eq_test_code", "functional_calls"]

# _deep_eq's default tolerance in GURU's TACO/PrimeIntellect tests (used when the helper's default is not a literal).
_DEEP_EQ_TOL = 1e-5


@dataclass(frozen=True)
class Call:
    """One call of the program's entry point and the value it must return.

    Attributes:
        entry: the name of the function or method.
        args: positional arguments.
        kwargs: keyword arguments.
        expected: the expected return value.
        tol: float tolerance for expected floats.
        via: how the test reaches ``entry``: ``function`` (a top-level function), ``shared`` (a method of one
            ``Solution()`` for all calls, as ``check(Solution().f)``), ``fresh`` (a method of a new ``Solution()``
            per call, as ``Solution().f(...)``), or ``either`` (a top-level function, else a method of one
            ``Solution()``: JSON ``fn_name`` tests).
    """

    entry: str
    args: list
    kwargs: dict
    expected: Any
    tol: float = FLOAT_TOL
    via: str = "either"


def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(node)  # raises ValueError/TypeError/SyntaxError/RecursionError/MemoryError for non-literals


def _entry(node: ast.AST) -> tuple[str, bool] | None:
    """(name, is a Solution method) of ``fn`` or ``Solution().method``."""
    if isinstance(node, ast.Name):
        return node.id, False
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "Solution"
        and not node.value.args
        and not node.value.keywords
    ):
        return node.attr, True
    return None


def _literal_call(node: ast.AST, callee: str | None) -> tuple[tuple[str, bool] | None, list, dict] | None:
    """(entry, args, kwargs) of a call with literal arguments; ``callee`` is the parameter standing for the entry
    point (the entry is then ``None``: the caller knows it)."""
    if not isinstance(node, ast.Call):
        return None
    if callee is not None:
        if not (isinstance(node.func, ast.Name) and node.func.id == callee):
            return None
        entry = None
    else:
        entry = _entry(node.func)
        if entry is None:
            return None
    if any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
        return None
    return entry, [_literal(arg) for arg in node.args], {kw.arg: _literal(kw.value) for kw in node.keywords}


def _assert_equal(statement: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
    """(call, expected) of ``assert <call> == <expected>``."""
    if not isinstance(statement, ast.Assert) or statement.msg is not None:
        return None
    test = statement.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return test.left, test.comparators[0]
    return None


def _check_function(tree: ast.Module) -> list[Call] | None:
    """LeetCode/HumanEval ``check(candidate)`` and LiveCodeBench ``check_f()`` forms."""
    if len(tree.body) != 2 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    func, final = tree.body
    params = [a.arg for a in func.args.args]
    if func.decorator_list or func.args.vararg or func.args.kwarg or func.args.kwonlyargs or len(params) > 1:
        return None
    if not (isinstance(final, ast.Expr) and isinstance(final.value, ast.Call)):
        return None
    run = final.value
    if not (isinstance(run.func, ast.Name) and run.func.id == func.name and not run.keywords):
        return None
    if len(run.args) != len(params):
        return None
    entry = _entry(run.args[0]) if params else None
    if params and entry is None:
        return None
    body = func.body[1:] if func.body and isinstance(func.body[0], ast.Expr) else func.body  # a docstring
    calls = []
    for statement in body:
        pair = _assert_equal(statement)
        call = _literal_call(pair[0], params[0] if params else None) if pair else None
        if call is None:
            return None
        (name, method), args, kwargs = entry if params else call[0], call[1], call[2]
        # check(Solution().f) binds one instance for all asserts; Solution().f(...) in each assert makes a new one.
        via = "function" if not method else ("shared" if params else "fresh")
        calls.append(Call(name, args, kwargs, _literal(pair[1]), via=via))
    return calls or None


def _deep_eq_loop(tree: ast.Module) -> list[Call] | None:
    """TACO/PrimeIntellect ``_inputs``/``_outputs``/``_deep_eq`` form."""
    body = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
    if len(body) != 4:
        return None
    inputs, outputs, helper, loop = body
    values = {}
    for statement in (inputs, outputs):
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return None
        values[statement.targets[0].id] = statement.value
    if set(values) != {"_inputs", "_outputs"}:
        return None
    if not (isinstance(helper, ast.FunctionDef) and helper.name == "_deep_eq"):
        return None
    tol = _DEEP_EQ_TOL
    if helper.args.defaults:
        try:
            tol = float(_literal(helper.args.defaults[-1]))
        except (ValueError, TypeError, SyntaxError):
            return None
    if not (
        isinstance(loop, ast.For)
        and not loop.orelse
        and len(loop.body) == 1
        and ast.dump(loop.target) == _LOOP_TARGET
        and ast.dump(loop.iter) == _LOOP_ITER
    ):
        return None
    statement = loop.body[0]
    test = statement.test if isinstance(statement, ast.Assert) and statement.msg is None else None
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "_deep_eq"
        and len(test.args) == 2
        and not test.keywords
    ):
        return None
    call, expected_form = test.args
    if not (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords):
        return None
    if ast.dump(call.args[0]) != _STARRED_I:
        return None
    entry = _entry(call.func)
    shape = _OUTPUT_SHAPES.get(ast.dump(expected_form))
    if entry is None or shape is None:
        return None
    name, via = entry[0], "fresh" if entry[1] else "function"
    all_inputs, all_outputs = _literal(values["_inputs"]), _literal(values["_outputs"])
    if not (isinstance(all_inputs, list) and isinstance(all_outputs, list) and len(all_inputs) == len(all_outputs)):
        return None
    calls = []
    for args, output in zip(all_inputs, all_outputs, strict=True):
        if not isinstance(args, list | tuple) or (shape != "o" and not isinstance(output, list | tuple)):
            return None
        if shape == "o":
            expected = output
        elif shape == "o[0]" or len(output) == 1:
            if not output:
                return None
            expected = output[0]
        else:
            expected = list(output)  # tuple(o): a tuple result, compared element-wise like a list
        calls.append(Call(name, list(args), {}, expected, tol, via))
    return calls or None


def deep_eq_test_code(inputs: list, outputs: list, entry: str) -> str:
    """GURU's TACO/PrimeIntellect test code for call tests of ``entry`` (as Reasoning360's preprocessing writes it).

    Args:
        inputs: argument lists, one per test.
        outputs: expected values, each wrapped in a list (``[value]``; longer lists mean a tuple result).
        entry: the function called, e.g. ``"add"`` or ``"Solution().add"``.
    """
    return (
        f"_inputs = {inputs!r}\n_outputs = {outputs!r}\nimport math\n"
        "def _deep_eq(a, b, tol=1e-5):\n"
        "    if isinstance(a, float) or isinstance(b, float):\n"
        "        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)\n"
        "    if isinstance(a, (list, tuple)):\n"
        "        if len(a) != len(b): return False\n"
        "        return all(_deep_eq(x, y, tol) for x, y in zip(a, b))\n"
        "    return a == b\n\n"
        "for i, o in zip(_inputs, _outputs):\n"
        f"    assert _deep_eq({entry}(*i), o[0] if len(o) == 1 else tuple(o))\n"
    )


def _expression(source: str) -> str:
    return ast.dump(ast.parse(source, mode="eval").body)


_LOOP_TARGET = ast.dump(ast.parse("for i, o in x: pass").body[0].target)
_LOOP_ITER = _expression("zip(_inputs, _outputs)")
_STARRED_I = ast.dump(ast.parse("f(*i)", mode="eval").body.args[0])
_OUTPUT_SHAPES = {
    _expression("o"): "o",
    _expression("o[0]"): "o[0]",
    _expression("o[0] if len(o) == 1 else tuple(o)"): "o[0] or tuple(o)",
}


def functional_calls(test_code: str) -> list[Call] | None:
    """The calls in ``test_code`` if it has one of GURU's literal forms (see the module docstring), else ``None``.

    Args:
        test_code: the ``functional`` test code of a ground truth.

    Returns:
        The calls in order, or ``None`` when the code does anything else (then the judge sandbox runs it).
    """
    try:
        tree = ast.parse(test_code)
        return _check_function(tree) or _deep_eq_loop(tree)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
