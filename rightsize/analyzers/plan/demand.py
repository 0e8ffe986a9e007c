"""Demand curves for ``rightsize plan``: a constant rate, or a CSV of rate over time.

Input: a number (work units per second: samples, tokens or requests, whatever
``--samples-per-step`` counts) or the text of a CSV with a header and two columns, time and rate.
Time is seconds from the start of the curve or a clock time ``HH:MM[:SS]``. Each row's rate holds
until the next row; the last row holds until the curve's end, one day after the first row (or,
when the rows span more than a day, one more interval of the same length as the last one).
Output: a frozen :class:`Demand`. Pure; no I/O (the CLI reads the file).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

from rightsize.errors import RightsizeError

DAY_S = 86_400.0


class DemandError(RightsizeError):
    """A demand value or CSV that cannot be read."""


@dataclass(frozen=True, slots=True)
class Demand:
    """A step function of demand: ``rate_per_s[i]`` from ``t_s[i]`` until the next start."""

    t_s: tuple[float, ...]
    rate_per_s: tuple[float, ...]
    end_s: float
    source: str

    @property
    def durations_s(self) -> tuple[float, ...]:
        ends = (*self.t_s[1:], self.end_s)
        return tuple(e - t for t, e in zip(self.t_s, ends, strict=True))

    @property
    def span_s(self) -> float:
        return self.end_s - self.t_s[0]

    @property
    def peak_per_s(self) -> float:
        return max(self.rate_per_s)

    @property
    def mean_per_s(self) -> float:
        """Time-weighted mean rate over the curve."""
        return sum(r * d for r, d in zip(self.rate_per_s, self.durations_s, strict=True)) \
            / self.span_s


def _rate(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DemandError(f"{where}: rate {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise DemandError(f"{where}: rate {text!r} must be a finite number >= 0")
    return value


def constant(rate_per_s: float) -> Demand:
    """The same rate all day."""
    rate = _rate(str(rate_per_s), "--demand")
    if rate <= 0:
        raise DemandError("--demand: a constant demand must be above 0 per second")
    return Demand((0.0,), (rate,), DAY_S, f"constant {rate:g}/s")


def _time(text: str, where: str) -> float:
    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(p.strip().isdigit() for p in parts):
            raise DemandError(f"{where}: time {text!r} is not HH:MM or HH:MM:SS")
        h, m, *s = (int(p) for p in parts)
        if m >= 60 or (s and s[0] >= 60):
            raise DemandError(f"{where}: time {text!r} has minutes or seconds over 59")
        return float(h * 3600 + m * 60 + (s[0] if s else 0))
    try:
        value = float(text)
    except ValueError:
        raise DemandError(f"{where}: time {text!r} is not seconds or HH:MM") from None
    if not math.isfinite(value) or value < 0:
        raise DemandError(f"{where}: time {text!r} must be a finite number of seconds >= 0")
    return value


def from_csv(text: str, name: str) -> Demand:
    """A demand curve from CSV text (header row, then ``time,rate`` rows)."""
    rows = [r for r in csv.reader(io.StringIO(text.lstrip("\ufeff"))) if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise DemandError(f"{name}: a demand CSV needs a header and at least one row")
    times: list[float] = []
    rates: list[float] = []
    for i, row in enumerate(rows[1:], start=2):
        if len(row) < 2:
            raise DemandError(f"{name}: row {i} needs two columns (time, rate)")
        t, r = _time(row[0], f"{name} row {i}"), _rate(row[1].strip(), f"{name} row {i}")
        if times and t <= times[-1]:
            raise DemandError(f"{name}: row {i}: times must increase ({row[0].strip()!r})")
        times.append(t)
        rates.append(r)
    if max(rates) <= 0:
        raise DemandError(f"{name}: every rate is 0; nothing to serve")
    if times[-1] - times[0] < DAY_S:
        end = times[0] + DAY_S
    else:
        end = times[-1] + (times[-1] - times[-2])
    return Demand(tuple(times), tuple(rates), end, f"{name} ({len(times)} rows)")
