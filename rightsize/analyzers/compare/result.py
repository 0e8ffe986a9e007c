"""The comparison of two analyses, as frozen results with the JSON contract of docs/compare.md.

Built by :func:`rightsize.analyzers.compare.compare`; rendered by ``rightsize.reports.compare_*``.
Times are ms per step (``*_ms``), shares percent of the step, ``change_pct`` is
``(b - a) / a * 100`` (``None`` when ``a`` is 0). Pure; no polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def change_pct(a: float | None, b: float | None) -> float | None:
    """``(b - a) / a`` in percent, rounded to 0.1; ``None`` when either is missing or a is 0."""
    if a is None or b is None or a == 0:
        return None
    return round((b - a) / a * 100, 1)


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


@dataclass(frozen=True, slots=True)
class SideInfo:
    """What one side is: where it came from, its GPU, precision, verdict and headline numbers."""

    label: str  # "A" | "B"
    path: str
    source: str  # "trace" (analyzed here, frames available) | "analysis-json" (a saved document)
    device: str  # the primary GPU's name as recorded, or "cpu"
    gpu: str | None  # the catalog GPU it matched
    precision: str | None
    verdict: str | None  # diagnosis bound
    confidence: float | None
    steps: int
    step_ms: float | None  # mean
    spread_ms: float | None  # (max - min) / 2 over the steps; None with fewer than 2 steps
    peak_memory_bytes: int | None
    shares_pct: Mapping[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "source": self.source, "device": self.device,
                "gpu": self.gpu, "precision": self.precision, "verdict": self.verdict,
                "confidence": self.confidence, "steps": self.steps,
                "step_ms": _r(self.step_ms), "spread_ms": _r(self.spread_ms),
                "peak_memory_bytes": self.peak_memory_bytes}


@dataclass(frozen=True, slots=True)
class Change:
    """One matched item (op, kernel, kernel group or share of the step) on both sides."""

    kind: str  # "share" | "group" | "op" | "kernel"
    name: str
    a_ms: float  # per step; 0 when the item is absent on that side
    b_ms: float
    reason: str | None = None  # one line, where the diagnosis knows why

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms

    @property
    def change_pct(self) -> float | None:
        return change_pct(self.a_ms, self.b_ms)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "a_ms": _r(self.a_ms), "b_ms": _r(self.b_ms),
                               "change_pct": self.change_pct,
                               "delta_ms": _r(self.delta_ms)}
        if self.kind in ("share", "group") or self.reason:
            out = {"kind": self.kind, **out, "reason": self.reason}
        return out


@dataclass(frozen=True, slots=True)
class StepChange:
    a: float | None
    b: float | None
    noise_ms: float | None  # spread_a + spread_b; None when either side has one step
    significant: bool | None  # |b - a| > noise_ms; None when the noise is unknown

    def to_json(self) -> dict[str, Any]:
        delta = None if self.a is None or self.b is None else _r(self.b - self.a)
        return {"a": _r(self.a), "b": _r(self.b), "change_pct": change_pct(self.a, self.b),
                "delta_ms": delta, "noise_ms": _r(self.noise_ms),
                "significant": self.significant}


@dataclass(frozen=True, slots=True)
class ProjectionCheck:
    """rightsize's projection of A's step onto B's GPU against B's measured step."""

    gpu: str
    projected_ms: float
    measured_ms: float
    range_ms: tuple[float, float] | None  # the projection's range, when the document has one

    @property
    def error_pct(self) -> float | None:
        return change_pct(self.measured_ms, self.projected_ms)

    @property
    def within_range(self) -> bool | None:
        if self.range_ms is None:
            return None
        return self.range_ms[0] <= self.measured_ms <= self.range_ms[1]

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "projected_ms": _r(self.projected_ms),
                "measured_ms": _r(self.measured_ms), "error_pct": self.error_pct,
                "range_ms": list(self.range_ms) if self.range_ms else None,
                "within_range": self.within_range}


@dataclass(frozen=True, slots=True)
class Comparison:
    a: SideInfo
    b: SideInfo
    step: StepChange
    matched_by: str  # "call-path" (frames) | "top-ops" (a saved document on either side)
    matched_pct: Mapping[str, float | None]  # share of each side's kernel (or op) time matched
    basis: str  # "kernel" | "host": what time the op and kernel tables are
    ops: tuple[Change, ...]  # by |delta| descending
    kernels: tuple[Change, ...]  # matched by normalized name, by |delta| descending
    groups: tuple[Change, ...]  # kernel groups (GEMM, attention...) from the diagnosis
    shares: tuple[Change, ...]  # exclusive shares of the step, in ms per step
    top_changes: tuple[Change, ...]  # shares, groups and ops together, by |delta|
    projection_check: ProjectionCheck | None
    notes: tuple[str, ...]
    kernel_matched_pct: Mapping[str, float | None] | None = None  # by normalized kernel name
    # two GPUs and something else (precision, work): why the projection is not checked
    differs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "a": self.a.to_json(), "b": self.b.to_json(),
            "step_ms": self.step.to_json(),
            "shares_pct": {"a": dict(self.a.shares_pct), "b": dict(self.b.shares_pct)},
            "ops": [c.to_json() for c in self.ops],
            "matched_pct": dict(self.matched_pct),
            "matched_by": self.matched_by, "basis": self.basis,
            "kernel_matched_pct": dict(self.kernel_matched_pct or {"a": None, "b": None}),
            "kernels": [c.to_json() for c in self.kernels],
            "kernel_groups": [c.to_json() for c in self.groups],
            "top_changes": [{"kind": c.kind, **c.to_json()} for c in self.top_changes],
            "memory_peak_bytes": {"a": self.a.peak_memory_bytes, "b": self.b.peak_memory_bytes},
        }
        if self.projection_check is not None:
            out["projection_check"] = self.projection_check.to_json()
        if self.differs:
            out["projection_not_checked"] = list(self.differs)
        out["notes"] = list(self.notes)
        return out
