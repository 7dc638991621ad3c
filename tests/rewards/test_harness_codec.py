"""The value codec between sandbox and judge/scorer: round trips, and malformed input is only ever a CodecError."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_verl.rewards._wire import CodecError, decode_value, encode_value


def _round_trip(value: object, classes: dict | None = None) -> object:
    return decode_value(json.loads(json.dumps(encode_value(value), allow_nan=False)), classes)


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=3
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=3)
        | st.binary(max_size=8)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip(value: object) -> None:
    assert _round_trip(value) == value


def test_special_numbers_cycles_sharing_and_objects() -> None:
    class Node:
        pass

    Node.__module__ = "__main__"  # as a class the program defines
    node = Node()
    node.val, node.next = 1, node
    shared = [1]
    cyclic: list = [shared, shared]
    cyclic.append(cyclic)
    decoded = _round_trip(
        {"n": node, "c": cyclic, "big": -(10**5000), "f": [math.inf, -math.inf], "nan": math.nan}, {"Node": Node}
    )
    assert decoded["n"].next is decoded["n"] and decoded["n"].val == 1 and type(decoded["n"]) is Node
    assert decoded["c"][0] is decoded["c"][1] and decoded["c"][2] is decoded["c"]
    assert decoded["big"] == -(10**5000) and decoded["f"] == [math.inf, -math.inf] and math.isnan(decoded["nan"])


def test_deep_structures_need_no_recursion() -> None:
    deep: object = []
    for _ in range(50_000):
        deep = (deep,)
    decoded = _round_trip(deep)
    for _ in range(50_000):
        decoded = decoded[0]
    assert decoded == []


def test_custom_behaviour_does_not_cross() -> None:
    class Sneaky(int):
        def __eq__(self, other: object) -> bool:
            return True

    class Opaque:
        def __eq__(self, other: object) -> bool:
            return True

    decoded = _round_trip([Sneaky(3)])
    assert type(decoded[0]) is int and decoded[0] == 3 and decoded[0] != 4
    with pytest.raises(CodecError):
        encode_value(Opaque())  # not a class of the program's own namespace, and not data
    with pytest.raises(CodecError, match="class"):
        decode_value({"r": [0], "n": [["o", "Opaque", []]]}, {})  # unknown classes are not instantiated


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_garbage_is_only_a_codec_error(root: object, nodes: object) -> None:
    for blob in ({"r": root, "n": nodes}, {"r": root, "n": [nodes]}, nodes):
        try:
            decode_value(blob, {})
        except CodecError:
            pass
