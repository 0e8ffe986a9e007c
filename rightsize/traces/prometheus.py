"""GPU metric series from a Prometheus server over HTTP: raw samples, or range queries, paged.

Default (:func:`fetch_raw`, from "raw samples, reduced per step here" below): range-vector
instant queries return every raw sample, and numpy reduces them per step exactly as the range
queries described next do (maxima equal, means within float rounding); :func:`fetch` falls back
to the range queries (:func:`fetch_range`) when a raw query is refused for another reason than
its size, and uses them for ``--save``. On 1,000 series x 7 days at 30 s the raw path fetched
in 20 s what the range queries took 104-165 s for (docs/fleet-metrics.md).

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


class PrometheusRefused(PrometheusError):
    """Prometheus answered with an HTTP error (``code``): it was reached, and said no."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


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


def _post(q: Query, form: Mapping[str, str], api: str = "/api/v1/query_range") -> bytes:
    req = urllib.request.Request(
        q.url + api, data=urllib.parse.urlencode(form).encode(),
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
        raise PrometheusRefused(f"Prometheus at {q.url} answered {exc.code} {exc.reason}"
                                f"{hint}: {msg}"[:400], exc.code) from None
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
          save: Callable[[str, bytes], None] | None = None,
          method: str = "auto") -> SeriesSet:
    """Every series of ``metrics`` (default: all of METRICS) over the query's window, one point
    per step with a sample. ``method``: ``"raw"`` (raw samples, reduced per step here),
    ``"range"`` (Prometheus reduces, ``query_range``) or ``"auto"``: raw, and the range queries
    where the server refuses a raw query for another reason than its size, or where ``save``
    is given (``save(metric, body)`` gets each range-query response: ``--save`` files stay
    range-query JSON that ``--from`` reads as step points)."""
    if method not in ("auto", "raw", "range"):
        raise ValueError(method)
    if method == "raw" or (method == "auto" and save is None):
        try:
            return fetch_raw(q, metrics, progress)
        except PrometheusRefused as exc:
            if method == "raw" or exc.code in (401, 403) or "too many samples" in str(exc):
                raise
            if progress is not None:
                progress(f"Prometheus refused a raw-sample query ({exc}); using range queries")
    return fetch_range(q, metrics, progress, save)


def fetch_range(q: Query, metrics: tuple[str, ...] | None = None,
                progress: Callable[[str], None] | None = None,
                save: Callable[[str, bytes], None] | None = None) -> SeriesSet:
    """The range-query path: ``max/avg_over_time`` evaluated by Prometheus every step.
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


# --- raw samples, reduced per step here ------------------------------------------------------

RAW_PAGE_SAMPLES = 10_000_000  # raw samples asked for in one query (Prometheus' default
# query.max-samples is 50,000,000; a page of ~10M samples is ~200 MB of JSON)
RAW_PAGE_MAX_S = 86_400.0  # and at most a day of the window per query
PROBE_S = 3600  # the sample rate is measured over the window's last hour


def raw_promql(metric: str, selector: str, range_ms: int) -> str:
    """The raw samples of ``metric`` in the ``range_ms`` before the evaluation time."""
    return f"{metric}{matchers(selector)}[{range_ms}ms]"


def _instant(q: Query, query: str, time_s: float) -> bytes:
    return _post(q, {"query": query, "time": f"{time_s:.3f}", "timeout": f"{int(q.timeout_s)}s"},
                 "/api/v1/query")


def sample_rate(q: Query, metric: str) -> float:
    """Raw samples per second of ``metric{selector}`` (all series together) over the last
    :data:`PROBE_S` of the window; 0 when there were none."""
    body = _instant(q, f"sum(count_over_time({metric}{matchers(q.selector)}[{PROBE_S}s]))",
                    q.end_s)
    try:
        doc = json.loads(body)
        result = doc["data"]["result"]
        return float(result[0]["value"][1]) / PROBE_S if result else 0.0
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        raise PrometheusError(f"{q.url}: {metric}: an unreadable sample-count answer") from None


def raw_pages(n_steps: int, step_s: float, rate_per_s: float) -> list[tuple[int, int]]:
    """(first, last) step index of each raw page: about :data:`RAW_PAGE_SAMPLES` samples at
    ``rate_per_s``, at most :data:`RAW_PAGE_MAX_S` of the window, at least one step."""
    per_day = max(1, int(RAW_PAGE_MAX_S // step_s))
    by_rate = int(RAW_PAGE_SAMPLES / (rate_per_s * step_s)) if rate_per_s > 0 else per_day
    size = max(1, min(per_day, by_rate))
    return [(k, min(k + size, n_steps) - 1) for k in range(0, n_steps, size)]


def _fetch_raw_page(q: Query, metric: str, start_ms: int, step_ms: int, k0: int,
                    k1: int) -> list[tuple[int, int, bytes]]:
    """The raw samples for steps ``k0..k1`` (``(t_k0 - step, t_k1]``): one response, or several
    when the server refuses the page as too big (halved, down to one step)."""
    query = raw_promql(metric, q.selector, (k1 - k0 + 1) * step_ms)
    try:
        return [(k0, k1, _instant(q, query, (start_ms + k1 * step_ms) / 1000))]
    except PrometheusRefused as exc:
        if "too many samples" not in str(exc):
            raise
        if k0 == k1:
            raise PrometheusRefused(f"{exc} (narrow --selector or shorten --step)",
                                    exc.code) from None
        mid = (k0 + k1 + 1) // 2
        return (_fetch_raw_page(q, metric, start_ms, step_ms, k0, mid - 1)
                + _fetch_raw_page(q, metric, start_ms, step_ms, mid, k1))


def reduce_steps(series: np.ndarray, t_ns: np.ndarray, value: np.ndarray, start_ms: int,
                 step_ms: int, k0: int, k1: int, how: str) -> tuple[np.ndarray, ...]:
    """Raw samples -> one point per (series, step) with a sample, as the range queries give:
    step ``k`` (evaluated at ``t_k = start + k * step``) holds the samples in
    ``(t_k - step, t_k]``, so each sample counts in exactly one step; ``max_over_time`` is the
    largest (NaN only when all are NaN, as Prometheus), ``avg_over_time`` the mean (a plain
    sum over the count: equal to Prometheus' incremental mean within float rounding).
    Only steps ``k0..k1`` are kept. Returns (series, t_ns of the step, value)."""
    t_ms = t_ns // 1_000_000
    k = -((start_ms - t_ms) // step_ms)  # ceil((t - start) / step)
    keep = (k >= k0) & (k <= k1)
    s, k, v = series[keep].astype(np.int64), k[keep], value[keep]
    if not len(v):
        return (np.empty(0, np.uint32), np.empty(0, np.int64), np.empty(0, np.float64))
    key = s * (k1 - k0 + 1) + (k - k0)
    if np.any(key[1:] < key[:-1]):  # Prometheus sends series in order, samples in time order
        order = np.argsort(key, kind="stable")
        key, v = key[order], v[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    if how == "max_over_time":
        out = np.fmax.reduceat(v, first)
    elif how == "avg_over_time":
        out = np.add.reduceat(v, first) / np.diff(np.r_[first, len(v)])
    else:
        raise ValueError(how)
    width = k1 - k0 + 1
    steps = key[first] % width + k0
    return ((key[first] // width).astype(np.uint32), (start_ms + steps * step_ms) * 1_000_000,
            out)


def fetch_raw(q: Query, metrics: tuple[str, ...] | None = None,
              progress: Callable[[str], None] | None = None) -> SeriesSet:
    """The raw-sample path: range-vector instant queries (``M{selector}[Nms]`` at a page's
    last step), paged by the measured sample rate, each page reduced per step with numpy as
    :func:`fetch_range`'s queries reduce it. Same series, steps and values (averages within
    float rounding)."""
    if q.step_s <= 0 or q.end_s < q.start_s:
        raise PrometheusError("the window is empty or the step is not positive")
    names = metrics or tuple(METRICS)
    start_ms, step_ms = round(q.start_s * 1000), round(q.step_s * 1000)
    if step_ms < 1:
        raise PrometheusError("the step is shorter than a millisecond")
    n_steps = int((q.end_s - q.start_s) // q.step_s) + 1
    jobs = [(m, k0, k1) for m in names
            for k0, k1 in raw_pages(n_steps, q.step_s, sample_rate(q, m))]
    ids: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    infos: list[SeriesInfo] = []
    frames: list[pl.DataFrame] = []
    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        pending: list[tuple[str, Future[list[tuple[int, int, bytes]]]]] = []
        it = iter(jobs)
        done = answers = 0
        while True:
            while len(pending) < IN_FLIGHT_PAGES and (job := next(it, None)) is not None:
                metric, k0, k1 = job
                pending.append((metric, pool.submit(_fetch_raw_page, q, metric, start_ms,
                                                    step_ms, k0, k1)))
            if not pending:
                break
            metric, fut = pending.pop(0)
            for k0, k1, body in fut.result():
                answers += 1
                try:
                    res = parse_range(body)
                except PromJsonError as exc:
                    raise PrometheusError(f"{q.url}: {metric}: {exc}") from None
                if not res.points.height:
                    continue
                s, t, v = reduce_steps(res.points.get_column("series").to_numpy(),
                                       res.points.get_column("t_ns").to_numpy(),
                                       res.points.get_column("value").to_numpy(), start_ms,
                                       step_ms, k0, k1, STEP_REDUCER[METRICS[metric].canonical])
                # a series enters with its first point (a sample only on the page's open
                # edge belongs to the page before), in the response's order
                lut = np.zeros(len(res.labels), dtype=np.uint32)
                for i in np.unique(s).tolist():
                    labels = normalize_labels(res.labels[i])
                    k = (metric, tuple(sorted(labels.items())))
                    if k not in ids:
                        ids[k] = len(infos)
                        infos.append(SeriesInfo(METRICS[metric].canonical, metric, labels))
                    lut[i] = ids[k]
                if len(v):
                    frames.append(pl.DataFrame({
                        "series": pl.Series(lut[s], dtype=pl.UInt32),
                        "t_ns": pl.Series(t, dtype=pl.Int64),
                        "value": pl.Series(v * METRICS[metric].factor, dtype=pl.Float64)}))
            done += 1
            if progress is not None:
                progress(f"Prometheus: {done}/{len(jobs)} raw pages ({answers} queries), "
                         f"{len(infos)} series")
    points = pl.concat(frames) if frames else empty_points()
    return SeriesSet(tuple(infos), points, f"Prometheus {q.url}", q.step_s,
                     int(q.start_s * 1e9), int(q.end_s * 1e9))


def instant_value(q: Query, query: str) -> float | None:
    """The single value of an instant ``query`` evaluated at the window's end (None: no
    series answered, or the value is not a finite number)."""
    body = _instant(q, query, q.end_s)
    try:
        result = json.loads(body)["data"]["result"]
        value = float(result[0]["value"][1]) if result else None
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        raise PrometheusError(f"{q.url}: an unreadable answer to {query[:80]!r}") from None
    return value if value is not None and np.isfinite(value) else None


def instant_vector(q: Query, query: str) -> list[tuple[dict[str, str], float]]:
    """Every series of an instant ``query`` at the window's end: (labels, value), values that
    are not finite numbers left out."""
    body = _instant(q, query, q.end_s)
    try:
        result = json.loads(body)["data"]["result"]
        out = [(dict(r["metric"]), float(r["value"][1])) for r in result]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        raise PrometheusError(f"{q.url}: an unreadable answer to {query[:80]!r}") from None
    return [(labels, v) for labels, v in out if np.isfinite(v)]
