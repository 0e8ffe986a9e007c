"""The one JSON codec of the analysis document: frozen dataclasses <-> plain JSON types.

Input/output: instances of the document classes (``rightsize.analyzers.document``) and the
dicts, lists and scalars ``json`` reads and writes. Keys are the field names in declaration
order (so a new field is one line), renamed with ``field(metadata={"key": ...})`` where the JSON
key is not a Python name (``class``). A field with ``metadata={"omit_none": True}`` is left out
when ``None``; a class may decide presence itself with a ``_present(name)`` method; an
``internal`` field (:func:`rightsize.node.internal`) is not written, a ``flattened`` mapping's
items are keys of the enclosing object (read by the types it names), and a ``num`` field is
written rounded to its digits. Enums are written as their values and read back as the enum. A
field named ``extra`` keeps the keys a newer analyzer of the same ``schema_version`` added
(adding keys does not change the version), so reading and writing again loses nothing. Decoding
checks types and raises a one-line :class:`~rightsize.errors.RightsizeError` naming the key that
is wrong. Pure; no polars.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from rightsize.errors import RightsizeError
from rightsize.node import EXTRA, FLATTEN, INTERNAL, REQUIRED, encode, json_fields, json_key

T = TypeVar("T")

__all__ = ["DocumentError", "decode", "encode", "json_fields", "json_key"]


class DocumentError(RightsizeError):
    """An analysis document that does not have the shape its schema_version promises."""


def decode(cls: type[T], data: Any, where: str = "document") -> T:
    """An instance of the document class ``cls`` from JSON types; wrong shapes raise."""
    return typing.cast(T, _decode(cls, data, where))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, value: Any, where: str) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _union(typing.get_args(tp), value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp, value, where)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        _expect(isinstance(value, list), where, "a list", value)
        exact = _exact_scalars(item)
        if exact and all(type(v) in exact for v in value):  # a long series: checked at once
            return tuple(value)
        return tuple(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        item = args[1] if args else Any
        _expect(isinstance(value, dict), where, "an object", value)
        exact = _exact_scalars(item)
        if exact and all(type(v) in exact for v in value.values()):
            return dict(value)
        return {k: _decode(item, v, f"{where}.{k}") for k, v in value.items()}
    return _scalar(tp, value, where)


def _union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in args:
        return None
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _decode(arg, value, where)
        except DocumentError as exc:
            errors.append(exc)
    raise errors[0] if errors else DocumentError(f"{where}: unexpected null")


def _dataclass(cls: type, value: Any, where: str) -> Any:
    _expect(isinstance(value, dict), where, "an object", value)
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    known = set()
    for f in dataclasses.fields(cls):
        if f.name == EXTRA or f.metadata.get(INTERNAL):
            continue
        if f.metadata.get(FLATTEN):
            types = f.metadata[FLATTEN]()
            kwargs[f.name] = {k: _decode(tp, value[k], f"{where}.{k}")
                              for k, tp in types.items() if k in value}
            known.update(types)
            for k in f.metadata[REQUIRED]():
                _present(k in value, where, k)
            continue
        key = json_key(f)
        known.add(key)
        if key in value:
            kwargs[f.name] = _decode(hints[f.name], value[key], f"{where}.{key}")
        else:
            _present(f.default is not dataclasses.MISSING
                     or f.default_factory is not dataclasses.MISSING, where, key)
    if EXTRA in {f.name for f in dataclasses.fields(cls)}:
        kwargs[EXTRA] = {k: v for k, v in value.items() if k not in known}
    return cls(**kwargs)


def _present(ok: bool, where: str, key: str) -> None:
    if not ok:
        raise DocumentError(f"{where}: the key {key!r} is missing")


def _enum(tp: type[enum.Enum], value: Any, where: str) -> Any:
    try:
        return tp(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in tp)
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise DocumentError(f"{where}: expected one of {choices}, found {shown}") from None


_SCALARS: dict[Any, tuple[type, ...]] = {
    float: (int, float), int: (int,), str: (str,), bool: (bool,), type(None): (type(None),),
}


@functools.cache
def _exact_scalars(tp: Any) -> frozenset[type]:
    """The JSON types a value of ``tp`` passes :func:`_scalar` with exactly (a float field
    takes int and float, not bool), when ``tp`` is a scalar or a union of scalars; else none."""
    args = typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)
    if not all(a in _SCALARS for a in args):
        return frozenset()
    return frozenset(t for a in args for t in _SCALARS[a])


def _scalar(tp: Any, value: Any, where: str) -> Any:
    ok = _SCALARS.get(tp)
    if ok is None:
        raise DocumentError(f"{where}: no decoder for {tp!r}")  # a bug in a document class
    _expect(isinstance(value, ok) and (tp is bool or not isinstance(value, bool)), where,
            tp.__name__, value)
    return value


def _expect(ok: bool, where: str, what: str, value: Any) -> None:
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:39] + "…"
        raise DocumentError(f"{where}: expected {what}, found {shown}")
