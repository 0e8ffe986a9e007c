"""GPU metric series from a Prometheus server: ``/api/v1/query_range`` over HTTP, paged.

Role: ask a Prometheus (or a compatible API: Thanos, Mimir, VictoriaMetrics) for every GPU
metric of :data:`rightsize.traces.fleet_series.METRICS` over a window and return them as one
:class:`~rightsize.traces.fleet_series.SeriesSet`. Standard library HTTP (``urllib``): POSTed
form queries, a bearer token when given, one-line errors.

Queries: ``max_over_time(M{selector}[r])`` for memory (a peak between two evaluations is kept)
and ``avg_over_time(M{selector}[r])`` for activity (the name put back with ``label_replace``),
evaluated every ``step_s``, with ``r`` one
millisecond short of the step: Prometheus 2 range selectors include both ends, and the windows
must not overlap, so each raw sample counts in exactly one step. A step with no raw sample in
its window has no point (a gap is a gap, never a repeated value).

Paging: Prometheus refuses a range query of more than 11,000 points per series; a window is cut
into pages of at most :data:`PAGE_POINTS` evaluations that meet without overlap. A page that
would load more samples than the server allows (``query.max-samples``) is split in two and
retried, down to :data:`MIN_PAGE_POINTS`. Pages are fetched by a few threads (socket reads
release the GIL) while earlier ones are parsed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.errors import RightsizeError
from rightsize.traces.fleet_series import (
    METRICS,
    STEP_REDUCER,
    SeriesInfo,
    SeriesSet,
    empty_points,
    normalize_labels,
)
from rightsize.traces.prom_json import PromJsonError, parse_range

MAX_POINTS = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points per timeseries"
PAGE_POINTS = 10_000
MIN_PAGE_POINTS = 500
FETCH_THREADS = 2
IN_FLIGHT_PAGES = 3  # pages downloaded ahead of the parser (bounds memory)


class PrometheusError(RightsizeError):
    """Prometheus could not be asked, or refused (one line)."""


@dataclass(frozen=True, slots=True)
class Query:
    url: str  # the server's base URL (http://host:9090, or with a path prefix)
    start_s: float
    end_s: float
    step_s: float
    selector: str = ""  # label matchers: 'namespace="ml"' (braces optional)
    token: str | None = None  # bearer token
    timeout_s: float = 120.0


def check_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PrometheusError(f"--prometheus: {url!r} is not an http(s) URL")
    return url.rstrip("/")


def matchers(selector: str) -> str:
    """``{a="b"}`` or ``a="b"`` -> ``{a="b"}``; empty -> ``""``."""
    s = selector.strip()
    if not s:
        return ""
    if s.startswith("{") != s.endswith("}"):
        raise PrometheusError(f"--selector: {selector!r} has unbalanced braces")
    return s if s.startswith("{") else "{" + s + "}"


def promql(metric: str, selector: str, step_s: float) -> str:
    """The step-reduced series of ``metric``, its name put back (``*_over_time`` drops it) so
    a saved response says what it holds."""
    window_ms = max(1, round(step_s * 1000) - 1)
    reduced = f"{STEP_REDUCER[METRICS[metric].canonical]}({metric}{matchers(selector)}" \
              f"[{window_ms}ms])"
    return f'label_replace({reduced}, "__name__", "{metric}", "", "")'


def pages(start_s: float, end_s: float, step_s: float,
          points: int = PAGE_POINTS) -> list[tuple[float, float]]:
    """(start, end) of each page: evaluations ``start + k * step`` up to ``end``, at most
    ``points`` a page, consecutive pages one step apart."""
    if step_s <= 0 or end_s < start_s:
        raise PrometheusError("the window is empty or the step is not positive")
    total = int((end_s - start_s) // step_s) + 1
    out = []
    for first in range(0, total, points):
        last = min(first + points, total) - 1
        out.append((start_s + first * step_s, start_s + last * step_s))
    return out


def _post(q: Query, form: Mapping[str, str]) -> bytes:
    req = urllib.request.Request(
        q.url + "/api/v1/query_range", data=urllib.parse.urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Accept": "application/json", "User-Agent": "rightsize"}, method="POST")
    if q.token:
        req.add_header("Authorization", f"Bearer {q.token}")
    try:
        with urllib.request.urlopen(req, timeout=q.timeout_s) as resp:  # http(s) only: check_url
            body: bytes = resp.read()
            return body
    except urllib.error.HTTPError as exc:
        detail = exc.read(4096)
        try:
            doc = json.loads(detail)
            msg = f"{doc.get('errorType', '')}: {doc.get('error', '')}".strip(": ")
        except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
            msg = detail.decode("utf-8", "replace").strip()[:200]
        hint = " (set the bearer token's environment variable)" if exc.code in (401, 403) else ""
        raise PrometheusError(f"Prometheus at {q.url} answered {exc.code} {exc.reason}"
                              f"{hint}: {msg}"[:400]) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"cannot reach Prometheus at {q.url}: {reason}") from None


def _fetch_page(q: Query, query: str, start_s: float, end_s: float) -> list[bytes]:
    """One page's responses: one, or several when the server refuses the page as too big."""
    form = {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
            "step": f"{q.step_s:g}", "timeout": f"{int(q.timeout_s)}s"}
    try:
        return [_post(q, form)]
    except PrometheusError as exc:
        if "too many samples" not in str(exc):
            raise
        n = int((end_s - start_s) // q.step_s) + 1
        if n <= MIN_PAGE_POINTS:
            raise PrometheusError(f"{exc} (narrow --selector or shorten --since)") from None
        half = start_s + (n // 2) * q.step_s
        return (_fetch_page(q, query, start_s, half - q.step_s)
                + _fetch_page(q, query, half, end_s))


def _jobs(q: Query, metrics: tuple[str, ...]) -> Iterator[tuple[str, str, float, float]]:
    for metric in metrics:
        query = promql(metric, q.selector, q.step_s)
        for a, b in pages(q.start_s, q.end_s, q.step_s):
            yield metric, query, a, b


def fetch(q: Query, metrics: tuple[str, ...] | None = None,
          progress: Callable[[str], None] | None = None,
          save: Callable[[str, bytes], None] | None = None) -> SeriesSet:
    """Every series of ``metrics`` (default: all of METRICS) over the query's window.
    ``save(metric, body)``: called with each raw response (``--save``)."""
    names = metrics or tuple(METRICS)
    ids: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    infos: list[SeriesInfo] = []
    frames: list[pl.DataFrame] = []
    jobs = list(_jobs(q, names))
    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        pending: list[tuple[str, Future[list[bytes]]]] = []
        it = iter(jobs)
        done = 0
        while True:
            while len(pending) < IN_FLIGHT_PAGES and (job := next(it, None)) is not None:
                metric, query, a, b = job
                pending.append((metric, pool.submit(_fetch_page, q, query, a, b)))
            if not pending:
                break
            metric, fut = pending.pop(0)
            for body in fut.result():
                if save is not None:
                    save(metric, body)
                try:
                    res = parse_range(body)
                except PromJsonError as exc:
                    raise PrometheusError(f"{q.url}: {metric}: {exc}") from None
                lut = np.empty(len(res.labels), dtype=np.uint32)
                for i, raw in enumerate(res.labels):
                    labels = normalize_labels(raw)
                    k = (metric, tuple(sorted(labels.items())))
                    if k not in ids:
                        ids[k] = len(infos)
                        infos.append(SeriesInfo(METRICS[metric].canonical, metric, labels))
                    lut[i] = ids[k]
                if res.points.height:
                    frames.append(res.points.with_columns(
                        pl.Series("series", lut[res.points.get_column("series").to_numpy()]),
                        pl.col("value") * METRICS[metric].factor))
            done += 1
            if progress is not None:
                progress(f"Prometheus: {done}/{len(jobs)} pages, {len(infos)} series")
    points = pl.concat(frames) if frames else empty_points()
    return SeriesSet(tuple(infos), points, f"Prometheus {q.url}", q.step_s,
                     int(q.start_s * 1e9), int(q.end_s * 1e9))
