"""One frozen class per concept: the analyzer result that is also a node of the JSON document.

A class decorated with :func:`node` is a ``frozen``, ``slots`` dataclass whose constructor
freezes what it is given: a list becomes a tuple and a mapping a :class:`FrozenMap`, which
cannot be changed, so a published document cannot be edited through its dict fields. Analyzers
fill the fields at full precision, in the units their names say.

:func:`encode` writes a node as JSON types (:mod:`rightsize.analyzers.document.codec` reads them
back); field metadata says how a field is written: :func:`num` rounds a float to its digits in
the JSON (each item of a tuple, each value of a mapping; ``omit_none=True`` leaves it out when
``None``), :func:`key` renames it (``class``), a :func:`flattened` mapping's items become keys
of the enclosing object (the analyzer sections of the document), and an :func:`internal` field
is part of the object but not of the JSON (the per-step shares in ns the document's steps are
made from, for example). Enums are written as their values and read back as enums. This module
imports nothing of rightsize, so every layer (the catalog too) can declare nodes. Pure; no
polars.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any, Generic, NoReturn, TypeVar, dataclass_transform, overload

T = TypeVar("T")
V = TypeVar("V")

ROUND = "round"  # metadata: digits a float field is rounded to
EXTRA = "extra"  # the field that keeps the keys a newer rightsize wrote
KEY = "key"  # metadata: the JSON key when it is not the field name (``class``)
OMIT_NONE = "omit_none"  # metadata: leave the key out when the value is None
FLATTEN = "flatten"  # metadata: a mapping whose items are keys of the enclosing object
REQUIRED = "required"  # metadata: the keys of a flattened mapping an object must have
INTERNAL = "internal"  # metadata: not part of the JSON document


class FrozenMap(dict[Any, Any]):
    """A ``dict`` that refuses changes (JSON, equality and ``isinstance(x, dict)`` still work)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a rightsize document is immutable: build a new one with "
                        "dataclasses.replace()")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


def num(digits: int, default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A float field written rounded to ``digits`` decimals (as ``round(float(x), digits)``)."""
    return _field(default, {ROUND: digits, **meta})


def key(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field whose JSON key is not a Python name (``class``)."""
    return _field(default, {KEY: name})


def flattened(types: Callable[[], Mapping[str, Any]],
              required: Callable[[], frozenset[str]] = frozenset, *,
              default_factory: Callable[[], Any] = FrozenMap) -> Any:
    """A mapping field whose items are written as keys of the enclosing object, where the field
    stands; ``types()`` says which keys it takes and the type each is read as, ``required()``
    which of them an object must have."""
    return dataclasses.field(default_factory=default_factory,
                             metadata={FLATTEN: types, REQUIRED: required})


def internal(*, default: Any = None) -> Any:
    """A field of the object that the JSON document does not carry."""
    return dataclasses.field(default=default, compare=False, repr=False,
                             metadata={INTERNAL: True})


class entry(Generic[V]):
    """A typed attribute that reads one key of a mapping field, by the attribute's name or
    ``key``: ``diagnosis = entry[Diagnosis | None]("headline")`` reads
    ``self.headline.get("diagnosis")``; ``default`` where the key is absent (``required``: a
    ``KeyError`` instead). Not a field: it is not written, the mapping is."""

    def __init__(self, mapping: str, default: Any = None, *, key: str = "",
                 required: bool = False) -> None:
        self.mapping, self.default, self.key, self.required = mapping, default, key, required

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    @overload
    def __get__(self, obj: None, owner: type) -> entry[V]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> V: ...

    def __get__(self, obj: object, owner: type) -> Any:
        if obj is None:
            return self
        values = getattr(obj, self.mapping)
        return values[self.key] if self.required else values.get(self.key, self.default)


def _field(default: Any, metadata: dict[str, Any]) -> Any:
    if isinstance(default, dict | list):
        value = default
        return dataclasses.field(default_factory=lambda: _freeze(value), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass_transform(frozen_default=True,
                     field_specifiers=(dataclasses.field, num, key, internal, flattened))
def node(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, slotted dataclass that freezes its containers."""
    own = cls.__dict__.get("__post_init__")
    cls.__post_init__ = _post_init(own)  # type: ignore[attr-defined]
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


class Node:
    """Base of the document's node classes (with :func:`node`): their JSON form."""

    __slots__ = ()

    def to_json(self) -> Any:
        """This node as the document writes it (plain JSON types, keys in field order)."""
        return encode(self)


def _post_init(own: Callable[[Any], None] | None) -> Callable[[Any], None]:
    def __post_init__(self: Any) -> None:
        for f in _plan(type(self)):
            value = getattr(self, f.name)
            fixed = _freeze(value)
            if fixed is not value:
                object.__setattr__(self, f.name, fixed)
        if own is not None:
            own(self)
    return __post_init__


_PLANS: dict[type, tuple[dataclasses.Field[Any], ...]] = {}


def _plan(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple(f for f in dataclasses.fields(cls)
                                   if not f.metadata.get(INTERNAL))
    return plan


def _freeze(value: Any) -> Any:
    if isinstance(value, FrozenMap) or value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, Mapping):
        return FrozenMap({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, tuple | list):
        items = tuple(_freeze(v) for v in value)
        if isinstance(value, tuple) and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items
    return value


def rounded(value: Any, digits: int) -> Any:
    """``value`` as the JSON writes a :func:`num` field: floats (and ints) rounded, in tuples
    and mapping values too; ``None`` and other values unchanged."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return round(float(value), digits)
    if isinstance(value, Mapping):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [rounded(v, digits) for v in value]
    return value


def published(obj: T) -> T:
    """``obj`` as its JSON reads back, without writing it: each :func:`num` field rounded, a
    field the JSON does not carry (internal, or left out) back to its default, all the way
    down; what is unchanged stays the same object."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes: dict[str, Any] = {}
        present = getattr(obj, "_present", None)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name == EXTRA:
                continue
            if f.metadata.get(INTERNAL) or (present is not None and not present(f.name)) \
                    or (f.metadata.get(OMIT_NONE) and value is None):
                new = f.default_factory() if f.default_factory is not dataclasses.MISSING \
                    else f.default
            elif f.metadata.get(ROUND) is not None:
                new = rounded(value, f.metadata[ROUND])
            else:
                new = published(value)
            if new is not value and new != value or type(new) is not type(value):
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj  # type: ignore[type-var]
    if isinstance(obj, tuple):
        items = tuple(published(v) for v in obj)
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items  # type: ignore[return-value]
    if isinstance(obj, Mapping) and not isinstance(obj, enum.Enum):
        out = {k: published(v) for k, v in obj.items()}
        return obj if all(out[k] is v for k, v in obj.items()) else FrozenMap(out)  # type: ignore[return-value]
    return obj


def json_key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get(KEY, f.name))


def json_fields(cls: Any) -> tuple[dataclasses.Field[Any], ...]:
    """The fields a node class writes under their own key, in order (not ``extra``, not
    internal ones, not a flattened mapping)."""
    return tuple(f for f in dataclasses.fields(cls) if f.name != EXTRA
                 and not f.metadata.get(INTERNAL) and not f.metadata.get(FLATTEN))


def encode(obj: Any) -> Any:
    """The JSON types of a document object (dataclasses, tuples, mappings, scalars)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        present = getattr(obj, "_present", None)
        for f in dataclasses.fields(obj):
            if f.name == EXTRA or f.metadata.get(INTERNAL):
                continue
            value = getattr(obj, f.name)
            if present is not None and not present(f.name):
                continue
            if f.metadata.get(OMIT_NONE) and value is None:
                continue
            if f.metadata.get(FLATTEN):
                out.update((str(k), encode(v)) for k, v in value.items())
                continue
            digits = f.metadata.get(ROUND)
            out[json_key(f)] = encode(value if digits is None else rounded(value, digits))
        for k, v in (getattr(obj, EXTRA, None) or {}).items():
            out.setdefault(k, encode(v))
        return out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [encode(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): encode(v) for k, v in obj.items()}
    return obj
