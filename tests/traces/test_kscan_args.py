"""``_kscan.parse``'s arguments: a call that names columns inconsistently is refused with a
Python exception before any byte is parsed (it once wrote past its column array when given
args fields without an "args" key), and a consistent one without "args" parses its batch."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from rightsize.traces import kscan
from rightsize.traces.kineto_scan import _Column

pytestmark = pytest.mark.skipif(kscan.BUILT is None, reason="_kscan was not compiled")

EVENT = b'{"name": "n", "x": {"a": "hello", "b": "world"}, "args": {"a": "x"}}\n'


@pytest.mark.parametrize(("top", "args", "kinds", "error", "message"), [
    # the args fields' columns would not exist: their values were written past the array
    (("name",), ("a", "b"), (0,), ValueError, 'need "args" among the top keys'),
    (("name",), ("a", "b"), (0, 0, 0), ValueError, 'need "args" among the top keys'),
    (("name", "name", "args"), (), (0, 0), ValueError, "top: 'name' named twice"),
    (("args", "name", "args"), ("a",), (0, 0), ValueError, "top: 'args' named twice"),
    (("name", "args"), ("a", "a"), (0, 0, 0), ValueError, "args: 'a' named twice"),
    (("name", 3), (), (0,), TypeError, "top: field names are str, not int"),
    (("args",), (b"a",), (0,), TypeError, "args: field names are str, not bytes"),
    (tuple(f"k{i}" for i in range(33)), (), (0,) * 33, ValueError, "top: at most 32 fields"),
    ((*(f"k{i}" for i in range(20)), "args"), tuple(f"a{i}" for i in range(13)), (0,) * 33,
     ValueError, "at most 32 columns, not 33"),
    (("name", "args"), ("a",), (0,), ValueError, r"kinds: one per column \(2\), not 1"),
    (("name",), (), (4,), ValueError, "kinds: 0 to 3"),
    (("name",), (), (-1,), ValueError, "kinds: 0 to 3"),
    (("name",), (), (1.0,), TypeError, "integer"),
])
def test_inconsistent_arguments_refused(top: tuple[Any, ...], args: tuple[Any, ...],
                                        kinds: tuple[Any, ...], error: type[Exception],
                                        message: str) -> None:
    with pytest.raises(error, match=message):
        kscan.BUILT.parse(EVENT, top, args, kinds, False)


def test_wrong_container_types_refused() -> None:
    with pytest.raises(TypeError):
        kscan.BUILT.parse(EVENT, ["name"], (), (0,), False)
    with pytest.raises(TypeError):
        kscan.BUILT.parse("text, not bytes", ("name",), (), (0,), False)


def test_without_args_unknown_keys_are_skipped() -> None:
    """Without "args" among the top keys an unknown key is skipped, whatever its value (it was
    taken for "args": a string made the batch fall back, an object was parsed as args)."""
    data = EVENT + b'{"x": "s", "y": [1, {"z": null}], "name": "m"}\n'
    columns = kscan.BUILT.parse(data, ("name",), (), (0,), False)
    assert columns is not None and len(columns) == 1
    assert pl.Series(_Column(columns[0])).to_list() == ["n", "m"]
    array = kscan.BUILT.parse(data.replace(b"}\n{", b"},\n{").rstrip(), ("name",), (), (0,), True)
    assert array is not None and pl.Series(_Column(array[0])).to_list() == ["n", "m"]


def test_consistent_arguments_with_args() -> None:
    columns = kscan.BUILT.parse(EVENT, ("args", "name"), ("a", "b"), (0, 0, 0), False)
    assert columns is not None
    assert [pl.Series(_Column(c)).to_list() for c in columns] == [["n"], ["x"], [None]]
