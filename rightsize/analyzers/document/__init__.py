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

import json
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from rightsize.analyzers.document.codec import DocumentError, decode, encode
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
from rightsize.analyzers.document.job import Job
from rightsize.analyzers.document.metrics import (
    Device,
    InputFile,
    Metrics,
    Rank,
    SelfOp,
    StepStats,
    Tool,
    TopKernel,
    TopOp,
)
from rightsize.analyzers.document.sizing import HostTimeline, PrecisionMix, Sizing, Timeline
from rightsize.analyzers.sections import value_types
from rightsize.node import OMIT_NONE, Node, flattened, node

# Changes when a key is renamed or removed or its meaning changes; adding keys does not.
SCHEMA_VERSION = 1
OLDEST_READABLE = 1

__all__ = ["SCHEMA_VERSION", "Document", "DocumentError"]


@node
class Document(Node):
    """One analysis: the primary rank's numbers at the top level, every rank under ``ranks``."""

    schema_version: int
    tool: Tool
    inputs: tuple[InputFile, ...]
    devices: tuple[Device, ...]
    steps: StepStats
    metrics: Metrics
    diagnosis: Diagnosis | None
    recommendations: tuple[Recommendation, ...]
    sizing: Sizing | None
    precision: PrecisionMix | None
    timeline: Timeline | None
    top_kernels: tuple[TopKernel, ...]
    top_ops: tuple[TopOp, ...]
    ranks: tuple[Rank, ...]
    definitions: Mapping[str, str]
    notes: tuple[str, ...]
    # the analyzer sections (``rightsize.analyzers.sections``), each under its own key
    sections: Mapping[str, Any] = flattened(value_types)
    host_timeline: HostTimeline | None = None  # host samples of a run directory
    # the ranks of one job together (several traces of one job only; no key otherwise)
    job: Job | None = field(default=None, metadata={OMIT_NONE: True})
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def self_ops(self) -> tuple[SelfOp, ...]:
        """Host ops by self time, per call path (empty in documents older than the key)."""
        ops: tuple[SelfOp, ...] = self.sections.get("self_ops", ())
        return ops

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
