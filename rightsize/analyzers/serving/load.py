"""The requests a simulation serves: Poisson arrivals at a rate, or a requests CSV.

Input: a rate (requests/s) with fixed prompt and output lengths and a seed, or the text of a CSV
with the columns ``arrival_s,prompt_tokens,output_tokens`` (a ShareGPT-like trace with its
arrivals; seconds from any origin, rows in any order). Output:
:class:`~rightsize.analyzers.serving.simulate.Requests`, sorted by arrival, shifted to start at
0. :func:`split` deals requests to replicas at random (a Kubernetes Service picks a backend at
random, so each replica sees a thinned Poisson stream). Pure; the CLI reads the file.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from rightsize.analyzers.serving.simulate import Requests
from rightsize.errors import RightsizeError

COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


class LoadError(RightsizeError):
    """A rate or requests CSV that cannot be simulated."""


def poisson(rate_per_s: float, isl: int, osl: int, n: int, seed: int = 0) -> Requests:
    """``n`` requests with exponential gaps of mean ``1 / rate`` (the first at 0)."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise LoadError(f"the request rate must be a positive number, not {rate_per_s}")
    if isl < 1 or osl < 1 or n < 1:
        raise LoadError("prompt tokens, output tokens and the number of requests must be >= 1")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, n)
    gaps[0] = 0.0
    return Requests(np.cumsum(gaps), np.full(n, isl, np.int64), np.full(n, osl, np.int64))


def from_csv(text: str, name: str) -> Requests:
    """Parse a requests CSV; one-line :class:`LoadError` on anything malformed."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise LoadError(f"{name}: empty; expected the columns {','.join(COLUMNS)}")
    head = [c.strip().lower() for c in rows[0]]
    missing = [c for c in COLUMNS if c not in head]
    if missing:
        raise LoadError(f"{name}: no column {', '.join(missing)} in the header "
                        f"(expected {','.join(COLUMNS)})")
    idx = [head.index(c) for c in COLUMNS]
    values: list[tuple[float, int, int]] = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            t, p, o = (row[i].strip() for i in idx)
            values.append((float(t), int(p), int(o)))
        except (IndexError, ValueError):
            raise LoadError(f"{name}: line {line}: expected a number of seconds and two whole "
                            f"token counts, got {','.join(row)!r}") from None
        if not math.isfinite(values[-1][0]) or values[-1][1] < 1 or values[-1][2] < 1:
            raise LoadError(f"{name}: line {line}: arrival must be finite and token counts "
                            ">= 1")
    if not values:
        raise LoadError(f"{name}: a header and no requests")
    arr = np.array(values, dtype=np.float64)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return Requests(arr[:, 0] - arr[0, 0], arr[:, 1].astype(np.int64),
                    arr[:, 2].astype(np.int64))


def rate_of(reqs: Requests) -> float:
    """Mean arrival rate (requests/s): ``(n - 1) / span`` (the gaps' mean, inverted)."""
    span = float(reqs.arrival_s[-1] - reqs.arrival_s[0])
    if len(reqs) < 2 or span <= 0:
        raise LoadError("a requests CSV needs at least two distinct arrival times for a rate")
    return (len(reqs) - 1) / span


def split(reqs: Requests, replicas: int, seed: int = 0) -> tuple[Requests, ...]:
    """Each request to a replica chosen uniformly at random; arrivals keep their times."""
    if replicas == 1:
        return (reqs,)
    pick = np.random.default_rng(seed).integers(0, replicas, len(reqs))
    return tuple(Requests(reqs.arrival_s[pick == r], reqs.prompt_tokens[pick == r],
                          reqs.output_tokens[pick == r]) for r in range(replicas)
                 if np.any(pick == r))


def subset(reqs: Requests, keep: np.ndarray) -> Requests:
    return Requests(reqs.arrival_s[keep], reqs.prompt_tokens[keep], reqs.output_tokens[keep])
