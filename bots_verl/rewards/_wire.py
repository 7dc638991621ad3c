"""The wire format the code sandboxes and the scorer share: frames and a value codec.

Imported by the scorer (:mod:`bots_verl.rewards.sandbox_channel`, :mod:`bots_verl.rewards.code_local`) and executed
inside every sandbox ahead of :mod:`bots_verl.rewards._harness_setup` and :mod:`bots_verl.rewards._harness`, in one
namespace (:func:`bots_verl.rewards.sandbox.launch`): so it imports only the standard library, nothing of ours.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Values travel as a flat node table
(:func:`encode_value`), so deep or cyclic structures need no recursion and cannot blow the stack of the reader. The
report of a stdin run is followed by the run's output as raw bytes (:func:`write_run`).
"""

from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct(">I")
# JSON cannot hold ints beyond what ``int.__str__`` allows (4300 digits); larger magnitudes travel as hex.
_INT_INLINE = 1 << 63


class CodecError(ValueError):
    """A value that cannot be encoded, or a node table that does not decode."""


# ---------------------------------------------------------------------------------------------------------- frames
def write_frame(fd: int, obj: object) -> None:
    """Write one frame to a blocking file descriptor."""
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def write_run(fd: int, report: dict, output: list[bytes]) -> None:
    """Write a run's report frame, then its ``report["stdout_bytes"]`` bytes of output raw, not as JSON.

    JSON would escape a control byte as six (``\\u0001``), and the scorer would hold the frame, a copy and the
    decoded string at once; raw, the scorer reads exactly the announced bytes (at most the output cap) into one buffer.
    """
    write_frame(fd, report)
    for chunk in output:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int = 1 << 30) -> object:
    """Read one frame from a blocking file descriptor; ``None`` at end of file or for an oversized frame."""
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > max_bytes:
        return None
    data = _read_exact(fd, size)
    return None if data is None else json.loads(data)


# ---------------------------------------------------------------------------------------------------------- values
_IMMUTABLE_TAGS = ("t", "s", "z")
_REF_TYPES = (list, dict)  # in a decoded frame, every other JSON value is a plain scalar
_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _special_float(value: float) -> dict:
    return {"f": "nan" if value != value else ("inf" if value > 0 else "-inf")}


def encode_value(value: object, max_nodes: int = 5_000_000) -> dict:
    """Encode a value as ``{"r": ref, "n": nodes}`` (iteratively: any depth; cycles and sharing preserved).

    A ref is a JSON scalar (``None``, a bool, a str, an int below 2**63, a finite float), ``{"i": hex}`` (a larger
    int), ``{"f": "nan"|"inf"|"-inf"}``, or ``[index]`` (a node). Nodes are ``["l"|"t"|"s"|"z", [refs]]`` (list,
    tuple, set, frozenset), ``["d", [key, value, key, value, ...]]``, ``["b", latin-1 text]`` (bytes) and
    ``["o", class name, [attribute, ref, attribute, ref, ...]]`` (an instance of a class the running program defined,
    by its ``__dict__``). Subclasses of builtin types travel as the builtin value, so no custom method crosses.

    Raises:
        CodecError: for a value of any other type, or more than ``max_nodes`` containers.
    """
    nodes: list = []
    index_of: dict[int, int] = {}
    keep_alive: list = []  # ids are unique only while their objects live
    todo: list = []

    def ref(item: object) -> object:
        kind = type(item)
        if kind is int:
            return item if -_INT_INLINE < item < _INT_INLINE else {"i": hex(item)}
        if kind is str or kind is bool or item is None:
            return item
        if kind is float:
            return item if item - item == 0.0 else _special_float(item)
        if kind not in (list, tuple, dict, set, frozenset):
            for base in (int, float, str):  # builtin subclasses become the builtin value (bool cannot be subclassed)
                if isinstance(item, base):
                    return ref(base(item))
        key = id(item)
        index = index_of.get(key)
        if index is None:
            index = index_of[key] = len(nodes)
            if index >= max_nodes:
                raise CodecError("value too large")
            keep_alive.append(item)
            nodes.append(None)
            todo.append(item)
        return [index]

    def refs(items: object) -> list:
        # Plain scalars inline without a call to ref(): most payloads are long runs of small ints and strings.
        return [
            x if (t := type(x)) is str or (t is int and -_INT_INLINE < x < _INT_INLINE) or x is None else ref(x)
            for x in items
        ]

    root = ref(value)
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is list or (kind is not tuple and isinstance(item, list)):
            node = ["l", refs(list.__iter__(item))]
        elif isinstance(item, tuple):
            node = ["t", refs(tuple.__iter__(item))]
        elif isinstance(item, dict):
            node = ["d", refs(x for pair in dict.items(item) for x in pair)]
        elif isinstance(item, frozenset):
            node = ["z", refs(frozenset.__iter__(item))]
        elif isinstance(item, set):
            node = ["s", refs(set.__iter__(item))]
        elif isinstance(item, bytes | bytearray):
            node = ["b", bytes(item).decode("latin-1")]
        else:
            attrs = getattr(item, "__dict__", None)
            if type(item).__module__ != "__main__" or not isinstance(attrs, dict):
                raise CodecError(f"cannot send a {type(item).__name__}")
            flat = []
            for key, val in dict.items(attrs):
                flat.append(str(key))
                flat.append(ref(val))
            node = ["o", str(type(item).__name__), flat]
        nodes[index_of[id(item)]] = node
    return {"r": root, "n": nodes}


def decode_value(blob: object, classes: dict | None = None, max_nodes: int | None = None) -> object:
    """Decode :func:`encode_value`'s output without running any of the sender's code.

    Args:
        blob: the ``{"r", "n"}`` dict.
        classes: class name -> class for ``"o"`` nodes; instances are made with ``object.__new__`` and their
            ``__dict__`` filled (``__init__`` is not called). An unknown class name is an error.
        max_nodes: refuse values of more containers than this (bounds the decoding time).

    Raises:
        CodecError: for anything malformed (unknown tags, bad references, unhashable keys, unknown classes) or too
            large.
    """
    if type(blob) is not dict or "r" not in blob or type(blob.get("n")) is not list:
        raise CodecError("not an encoded value")
    nodes = blob["n"]
    if max_nodes is not None and len(nodes) > max_nodes:
        raise CodecError(f"more than {max_nodes} containers")
    count = len(nodes)
    built: list = [None] * count
    pending_immutables = []
    for i, node in enumerate(nodes):
        if type(node) is not list or len(node) < 2:
            raise CodecError("bad node")
        tag = node[0]
        if tag == "l" or tag == "d":
            if type(node[1]) is not list or (tag == "d" and len(node[1]) % 2):
                raise CodecError("bad node payload")
            built[i] = [] if tag == "l" else {}
        elif tag == "o":
            cls = (classes or {}).get(node[1]) if len(node) == 3 and type(node[1]) is str else None
            if not isinstance(cls, type) or type(node[2]) is not list or len(node[2]) % 2:
                raise CodecError(f"unknown class or bad object node ({node[1] if len(node) > 1 else None!r})")
            try:
                built[i] = object.__new__(cls)
            except TypeError as err:
                raise CodecError(f"cannot rebuild a {cls.__name__}") from err
        elif tag == "b" and type(node[1]) is str:
            try:
                built[i] = node[1].encode("latin-1")
            except UnicodeEncodeError as err:
                raise CodecError("bad bytes") from err
        elif tag in _IMMUTABLE_TAGS and type(node[1]) is list:
            pending_immutables.append(i)
        else:
            raise CodecError(f"bad node {tag!r}")

    def value(ref: object) -> object:
        kind = type(ref)
        if kind is list:
            if len(ref) == 1 and type(ref[0]) is int and 0 <= ref[0] < count:
                found = built[ref[0]]
                if found is not None:
                    return found
                raise _Unbuilt(ref[0])
            raise CodecError("bad reference")
        if kind is dict:
            if len(ref) == 1:
                if type(ref.get("i")) is str:
                    try:
                        return int(ref["i"], 16)
                    except ValueError as err:
                        raise CodecError("bad int") from err
                if ref.get("f") in _NONFINITE:
                    return _NONFINITE[ref["f"]]
            raise CodecError("bad reference")
        return ref  # json.loads makes only None, bool, int, float and str besides lists and dicts

    # Tuples and (frozen)sets need their members first: post-order with an explicit stack. Mutable nodes exist
    # already as empty shells, so a legitimate cycle always passes through one; any other cycle is an error.
    for start in pending_immutables:
        stack, on_stack = [start], {start}  # the stack is a dependency path: each entry waits for the one above
        while stack:
            i = stack[-1]
            if built[i] is not None:
                on_stack.discard(stack.pop())
                continue
            try:
                members = [value(ref) for ref in nodes[i][1]]
            except _Unbuilt as missing:
                if missing.index in on_stack:
                    raise CodecError("cycle through immutable nodes") from None
                stack.append(missing.index)
                on_stack.add(missing.index)
                continue
            tag = nodes[i][0]
            try:
                built[i] = tuple(members) if tag == "t" else set(members) if tag == "s" else frozenset(members)
            except TypeError as err:
                raise CodecError("unhashable member") from err
            on_stack.discard(stack.pop())

    try:
        for i, node in enumerate(nodes):
            tag = node[0]
            if tag == "l":
                built[i].extend([r if type(r) not in _REF_TYPES else value(r) for r in node[1]])
            elif tag == "d":
                flat = node[1]
                target = built[i]
                for k in range(0, len(flat), 2):
                    target[value(flat[k])] = value(flat[k + 1])
            elif tag == "o":
                flat = node[2]
                attrs = built[i].__dict__
                for k in range(0, len(flat), 2):
                    if type(flat[k]) is not str:
                        raise CodecError("bad attribute")
                    attrs[flat[k]] = value(flat[k + 1])
        return value(blob["r"])
    except _Unbuilt as err:
        raise CodecError("unresolved reference") from err
    except TypeError as err:  # an unhashable dict key
        raise CodecError("unhashable key") from err


class _Unbuilt(Exception):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index
