"""The fleet report's model: frozen dataclasses that the text, JSON and HTML renderers all take
(built by :func:`rightsize.fleet.report.build`), its filters, and the usage CSV it may read.

Input of :func:`read_usage`: a ``label,gpu_hours`` CSV (GPU-hours per month of each job label).
Everything else is plain data; docs/fleet.md defines every figure.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError


class UsageError(RightsizeError):
    """A usage CSV that cannot be read."""


@dataclass(frozen=True, slots=True)
class Filters:
    teams: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    since: date | None = None  # recorded on or after (UTC day)
    until: date | None = None  # recorded on or before
    sources: tuple[str, ...] = ()  # trace, metrics (schema.SOURCES); () is both


@dataclass(frozen=True, slots=True)
class Usage:
    hours_per_month: dict[str, float]
    source: str


def read_usage(path: Path) -> Usage:
    """``label,gpu_hours`` per line (a header first): GPU-hours per month of each job label."""
    try:
        text = path.read_text("utf-8").lstrip("\ufeff")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the usage file ({exc})") from None
    rows = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(rows, [])]
    if header != ["label", "gpu_hours"]:
        raise UsageError(f"{path}: the first line must be the header label,gpu_hours "
                         f"(got {','.join(header)!r})")
    hours: dict[str, float] = {}
    for n, row in enumerate(rows, 2):
        if not row or not "".join(row).strip():
            continue
        try:
            label, value = row[0].strip(), float(row[1])
        except (IndexError, ValueError):
            raise UsageError(f"{path}, line {n}: expected label,gpu_hours with a number") from None
        if not label or not math.isfinite(value) or value < 0:
            raise UsageError(f"{path}, line {n}: a label and finite GPU-hours >= 0 are needed")
        hours[label] = hours.get(label, 0.0) + value
    return Usage(hours, str(path))


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    jobs: int
    jobs_with_hours: int
    gpu_hours: float | None
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class Saving:
    key: str
    job: str
    source: str
    team: str | None
    project: str | None
    recorded_at: str
    gpu: str | None
    gpus: int | None
    recommended_gpu: str | None
    recommended_gpus: int | None
    recommended: str | None  # the placement in words ("1 x MIG 1g.10gb on A100 80GB SXM")
    confidence_level: str | None
    bound: str | None
    savings_pct: float | None
    usd_per_1k_steps: float | None
    recommended_usd_per_1k_steps: float | None
    savings_per_1k_steps_usd: float | None
    gpu_hours_per_month: float | None
    savings_per_month_usd: float | None
    reason: str | None
    document: str | None


@dataclass(frozen=True, slots=True)
class Bottleneck:
    id: str
    title: str
    jobs: int
    jobs_pct: float
    median_gain_pct: float | None  # what-if: the step that much shorter, median over jobs


@dataclass(frozen=True, slots=True)
class Week:
    start: str
    end: str
    jobs: int
    by_verdict: dict[str, int]
    by_bound: dict[str, int]
    savings_per_month_usd: float | None


@dataclass(frozen=True, slots=True)
class Change:
    job: str
    key: str
    before: str
    after: str
    document: str | None


@dataclass(frozen=True, slots=True)
class JobLine:
    key: str
    job: str
    source: str
    team: str | None
    project: str | None
    recorded_at: str
    status: str
    reason: str | None
    gpu: str | None
    gpus: int | None
    bound: str | None
    sizing_verdict: str | None
    recommended_gpu: str | None
    recommended: str | None
    confidence_level: str | None
    savings_pct: float | None
    document: str | None


@dataclass(frozen=True, slots=True)
class FleetReport:
    table: str
    generated_at: str
    version: str
    filters: dict[str, Any]
    first_day: str | None
    last_day: str | None
    jobs: int
    ok: int
    bad_input: int
    failed: int
    hours_source: str  # usage | run | none
    hours_note: str
    usage_unmatched: tuple[str, ...]
    gpu_hours: float | None
    cost_usd: float | None
    by_verdict: tuple[Group, ...]
    by_bound: tuple[Group, ...]
    by_team: tuple[Group, ...]
    by_source: tuple[Group, ...]
    over_provisioned: tuple[Saving, ...]
    over_provisioned_total: int
    savings_per_month_usd: float | None
    bottlenecks: tuple[Bottleneck, ...]
    this_week: Week | None
    previous_week: Week | None
    changed: tuple[Change, ...]
    errors: tuple[JobLine, ...]
    job_lines: tuple[JobLine, ...]
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["schema_version"] = 1
        return out
