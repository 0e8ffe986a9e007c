"""The typed analysis document: what reports, compare, serve and plan consume.

:class:`Document` and the classes it holds (``metrics``, ``diagnosis``, ``sizing`` modules) are
frozen dataclasses whose fields are the keys of the ``rightsize analyze --format json`` contract
(docs/json-contract.md), in order. :meth:`Document.to_json` is the one place the JSON is shaped
and :meth:`Document.from_json` the one place it is read back (:mod:`.codec`); a document of an
older ``schema_version`` is read, a newer one is refused in one line. :func:`.build.document`
makes one from an :class:`~rightsize.analyzers.analysis.Analysis`. Importing this package does
not import polars.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import Any

from rightsize.analyzers import sections as registry
from rightsize.analyzers.document.codec import DocumentError, decode, encode
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.document.metrics import (
    NO_METRICS,
    NO_STEPS,
    Device,
    InputFile,
    Metrics,
    Rank,
    StepStats,
    Tool,
    TopKernel,
    TopOp,
)
from rightsize.analyzers.document.sizing import HostTimeline, PrecisionMix, Sizing, Timeline
from rightsize.analyzers.sections import required_keys, value_types
from rightsize.node import OMIT_NONE, FrozenMap, Node, entry, flattened, node

# Changes when a key is renamed or removed or its meaning changes; adding keys does not.
SCHEMA_VERSION = 1
OLDEST_READABLE = 1

__all__ = ["SCHEMA_VERSION", "Document", "DocumentError"]


@node
class Document(Node):
    """One analysis: the primary rank's numbers at the top level, every rank under ``ranks``.
    The analyzer sections (``rightsize.analyzers.sections``) are written in two places: the
    primary rank's headline keys before ``ranks`` (``steps`` ... ``top_ops``) and the others
    after ``notes``; the properties below read the headline ones by name."""

    schema_version: int
    tool: Tool
    inputs: tuple[InputFile, ...]
    devices: tuple[Device, ...]
    headline: Mapping[str, Any] = flattened(partial(value_types, True), required_keys,
                                            default_factory=FrozenMap)
    ranks: tuple[Rank, ...] = ()
    definitions: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    sections: Mapping[str, Any] = flattened(partial(value_types, False),
                                            default_factory=FrozenMap)
    host_timeline: HostTimeline | None = None  # host samples of a run directory
    # the ranks of one job together (several traces of one job only; no key otherwise)
    job: Job | None = field(default=None, metadata={OMIT_NONE: True})
    extra: Mapping[str, Any] = field(default_factory=dict)

    # typed names for the headline sections' values
    steps = entry[StepStats]("headline", NO_STEPS)
    metrics = entry[Metrics]("headline", NO_METRICS)
    diagnosis = entry[Diagnosis | None]("headline")
    recommendations = entry[tuple[Recommendation, ...]]("headline", ())
    sizing = entry[Sizing | None]("headline")
    precision = entry[PrecisionMix | None]("headline")
    timeline = entry[Timeline | None]("headline")
    top_kernels = entry[tuple[TopKernel, ...]]("headline", ())
    top_ops = entry[tuple[TopOp, ...]]("headline", ())

    def section(self, key: str) -> Any:
        """A section's value by its key, wherever the document writes it (``None``, or no
        rows, when this document has none)."""
        if key in self.headline:
            return self.headline[key]
        if key in self.sections:
            return self.sections[key]
        many = {s.key: s.many for s in registry.SECTIONS}
        return () if many.get(key) else None

    def with_sections(self, **values: Any) -> Document:
        """A copy with these sections' values replaced (``doc.with_sections(top_ops=())``)."""
        head = set(value_types(True))
        return dataclasses.replace(
            self, headline={**self.headline, **{k: v for k, v in values.items() if k in head}},
            sections={**self.sections, **{k: v for k, v in values.items() if k not in head}})

    @property
    def primary_device(self) -> Device | None:
        return next((d for d in self.devices if d.primary), None)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types, keys in contract order (``json.dumps`` writes them as they are)."""
        out: dict[str, Any] = encode(self)
        return out

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | Path) -> Document:
        """Read a document (a parsed dict, or a file path): older schema versions are read,
        newer ones refused, a wrong shape named by its key; every problem is one line."""
        if isinstance(data, str | Path):
            data = _load(Path(data))
        if not isinstance(data, Mapping):
            raise DocumentError("an analysis document is a JSON object")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise DocumentError("not a rightsize analysis document (no schema_version)")
        if version > SCHEMA_VERSION:
            raise DocumentError(
                f"analysis document schema_version {version} is newer than this rightsize "
                f"reads ({SCHEMA_VERSION}); upgrade rightsize")
        if version < OLDEST_READABLE:
            raise DocumentError(f"analysis document schema_version {version} is too old")
        return decode(cls, dict(data))


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentError(f"{path}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
