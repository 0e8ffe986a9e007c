"""Files that ``rightsize fleet metrics --from`` reads, as GPU metric series.

Three kinds, told apart by their first bytes:

* **saved range-query JSON**: a ``/api/v1/query_range`` response as Prometheus sends it (what
  ``curl`` or ``rightsize fleet metrics --save`` writes), a JSON array of them, or one per line.
  Each series names its metric in ``__name__`` (a raw selector query keeps it; ``--save``
  writes it).
* **a per-pod metric CSV** shaped like the Alibaba GenAI-2026 files: ``value``, a timestamp in
  epoch seconds (``timestamp_anon`` or ``timestamp``) and a pod key (``container_ip`` or
  ``pod``), in any column order; the metric is a ``metric`` column or is named by the file
  (``*duty_cycle*`` is the kubelet's ``container_accelerator_duty_cycle``,
  ``*memory_used_bytes*`` its ``container_accelerator_memory_used_bytes``, or a metric name of
  :data:`~rightsize.traces.fleet_series.METRICS` itself).
* **an nvidia-smi ``--query-gpu`` CSV, a dcgm-exporter scrape or a dcgmi dmon log** (read by
  :mod:`rightsize.traces.metrics_logs`): the file is one workload named by its stem, each GPU of
  it one series per metric.

Outputs: a :class:`~rightsize.traces.fleet_series.SeriesSet` per file. Errors: one-line
:class:`~rightsize.errors.InputError`.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl

from rightsize.errors import InputError
from rightsize.traces import limits
from rightsize.traces.fleet_series import (
    METRICS,
    SeriesInfo,
    SeriesSet,
    empty_points,
    merge,
    normalize_labels,
)
from rightsize.traces.metrics_logs import metrics_log_kind, read_metrics_log
from rightsize.traces.prom_json import PromJsonError, parse_range

TIME_COLUMNS = ("timestamp_anon", "timestamp", "time", "t")
KEY_COLUMNS = ("container_ip", "pod")
# file-name fragment -> exporter metric (the Alibaba GenAI-2026 files)
NAME_HINTS: tuple[tuple[str, str], ...] = (
    ("gpu_duty_cycle", "container_accelerator_duty_cycle"),
    ("gpu_memory_used_bytes", "container_accelerator_memory_used_bytes"),
)
# GPU_SAMPLES column -> the exporter metric it is
LOG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpu_util_pct", "DCGM_FI_DEV_GPU_UTIL"),
    ("gpm_sm_util_pct", "DCGM_FI_PROF_SM_ACTIVE"),
    ("gpm_tensor_util_pct", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("gpm_dram_bw_util_pct", "DCGM_FI_PROF_DRAM_ACTIVE"),
    ("mem_used_bytes", "DCGM_FI_DEV_FB_USED"),
)
KNOWN = ", ".join(METRICS)


def read(path: Path) -> SeriesSet:
    """One ``--from`` file as series (see the module docstring)."""
    limits.check_regular(path, stdin_hint=False)
    if path.is_dir():
        raise InputError(path, "a directory: name the metric files in it")
    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError as exc:
        raise InputError(path, f"cannot read it ({exc.strerror or exc})") from None
    text_head = head.lstrip()
    if text_head[:1] in (b"{", b"["):
        return _read_json(path)
    if metrics_log_kind(head) is not None:
        return _read_log(path)
    first = head.decode("utf-8", "replace").splitlines()[0] if head else ""
    header = [c.strip() for c in next(csv.reader(io.StringIO(first)), [])]
    if "value" in header and any(c in header for c in TIME_COLUMNS):
        return _read_csv(path, header)
    raise InputError(path, "not a metrics file rightsize fleet metrics reads (a saved "
                           "query_range JSON, a value/timestamp/pod CSV, an nvidia-smi or DCGM "
                           "log)")


def _bytes(path: Path) -> bytes:
    """A saved response whole (one line of any length: the line cap of CSVs does not apply)."""
    size = path.stat().st_size
    cap = limits.cap(limits.TEXT_FILE_BYTES)
    if size > cap:
        raise InputError(path, f"{size} bytes is over the {cap}-byte cap on a text input "
                               f"(${limits.TEXT_FILE_BYTES.env} raises it)")
    return path.read_bytes()


def _responses(body: bytes) -> list[bytes]:
    """A response, an array of responses, or one response per line."""
    stripped = body.lstrip()
    if stripped[:1] == b"{":
        lines = [ln for ln in stripped.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip()[:1] == b"{" and ln.rstrip()[-1:] == b"}"
                                  for ln in lines[:2]):
            try:
                json.loads(lines[0])
                return lines
            except json.JSONDecodeError:
                pass
        return [body]
    try:
        items = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PromJsonError(f"not valid JSON ({exc})") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise PromJsonError("a JSON array that is not of query_range responses")
    return [json.dumps(i, separators=(",", ":")).encode() for i in items]


def _read_json(path: Path) -> SeriesSet:
    sets = []
    try:
        for body in _responses(_bytes(path)):
            res = parse_range(body)
            infos = []
            for raw in res.labels:
                name = raw.get("__name__", "")
                if name not in METRICS:
                    what = f"metric {name!r}" if name else "a series without __name__"
                    raise InputError(path, f"{what} is not a GPU metric rightsize reads "
                                           f"(known: {KNOWN})")
                infos.append(SeriesInfo(METRICS[name].canonical, name, normalize_labels(raw)))
            factors = pl.Series([METRICS[i.source_metric].factor for i in infos],
                                dtype=pl.Float64)
            points = res.points.with_columns(
                pl.col("value") * factors.gather(res.points.get_column("series")))
            sets.append(SeriesSet(tuple(infos), points, str(path)))
    except PromJsonError as exc:
        raise InputError(path, str(exc)) from None
    return _dedupe(merge(sets, str(path)))


def _dedupe(s: SeriesSet) -> SeriesSet:
    """Series of one metric and labels that came in several responses (pages) as one."""
    ids: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    infos: list[SeriesInfo] = []
    lut: list[int] = []
    for info in s.series:
        k = (info.source_metric, tuple(sorted(info.labels.items())))
        if k not in ids:
            ids[k] = len(infos)
            infos.append(info)
        lut.append(ids[k])
    if len(infos) == len(s.series):
        return s
    points = s.points.with_columns(
        pl.col("series").replace_strict(list(range(len(lut))), lut, return_dtype=pl.UInt32))
    points = points.unique(["series", "t_ns"], keep="first", maintain_order=True)
    return SeriesSet(tuple(infos), points, s.source, s.step_s, s.start_ns, s.end_ns)


def _metric_of(path: Path) -> str | None:
    stem = path.name.lower()
    for hint, metric in NAME_HINTS:
        if hint in stem:
            return metric
    return next((m for m in METRICS if m.lower() in stem), None)


def _read_csv(path: Path, header: list[str]) -> SeriesSet:
    tcol = next(c for c in TIME_COLUMNS if c in header)
    key = next((c for c in KEY_COLUMNS if c in header), None)
    if key is None:
        raise InputError(path, f"no pod key column ({' or '.join(KEY_COLUMNS)})")
    cols = [tcol, "value", key] + (["metric"] if "metric" in header else [])
    try:
        frame = pl.read_csv(io.BytesIO(limits.read_bytes(path)), columns=cols,
                            schema_overrides={tcol: pl.Float64, "value": pl.Float64,
                                              key: pl.String})
    except pl.exceptions.PolarsError as exc:
        raise InputError(path, f"not a value/timestamp CSV ({str(exc).splitlines()[0]})") \
            from None
    if "metric" not in frame.columns:
        metric = _metric_of(path)
        if metric is None:
            raise InputError(path, "which metric? Name the file after one (…duty_cycle…, "
                                   "…memory_used_bytes…, or one of " + KNOWN + ") or add a "
                                   "'metric' column")
        frame = frame.with_columns(pl.lit(metric).alias("metric"))
    unknown = set(frame.get_column("metric").unique().to_list()) - set(METRICS)
    if unknown:
        raise InputError(path, f"metric {min(unknown)!r} is not a GPU metric rightsize "
                               f"reads (known: {KNOWN})")
    frame = frame.drop_nulls([tcol, "value", key])
    keys = frame.select("metric", key).unique(maintain_order=True)
    infos = tuple(SeriesInfo(METRICS[m].canonical, m, {"pod": k})
                  for m, k in keys.iter_rows())
    ids = keys.with_row_index("series")
    points = (frame.join(ids, on=["metric", key], how="left")
              .select(pl.col("series").cast(pl.UInt32),
                      (pl.col(tcol) * 1e9).round(0).cast(pl.Int64).alias("t_ns"),
                      (pl.col("value") * pl.col("metric").replace_strict(
                          {m: d.factor for m, d in METRICS.items()}, default=1.0))
                      .alias("value"))
              .sort("series", "t_ns"))
    return SeriesSet(infos, points, str(path))


def _read_log(path: Path) -> SeriesSet:
    samples = read_metrics_log(path)
    if samples.is_empty():
        return SeriesSet((), empty_points(), str(path))
    if samples.get_column("t_ns").null_count() == samples.height:
        raise InputError(path, "the log has no timestamps (a dcgmi dmon log needs its start "
                               "and interval: convert it with timestamps first)")
    infos: list[SeriesInfo] = []
    frames: list[pl.DataFrame] = []
    samples = samples.with_columns(pl.col("gpu_index").fill_null(0))
    for (gpu,), rows in samples.group_by(["gpu_index"], maintain_order=True):
        uuid = rows.get_column("gpu_uuid").drop_nulls()
        for column, metric in LOG_COLUMNS:
            vals = rows.select("t_ns", pl.col(column).cast(pl.Float64).alias("value")) \
                .drop_nulls()
            if vals.is_empty():
                continue
            # "file": the workload is the file (no pod name to take controller suffixes off)
            labels = {"pod": path.stem, "file": path.stem, "gpu": str(gpu)}
            if len(uuid):
                labels["uuid"] = str(uuid[0])
            frames.append(vals.select(pl.lit(len(infos), pl.UInt32).alias("series"),
                                      "t_ns", "value"))
            # GPU_SAMPLES holds bytes already: the canonical unit, whatever the log's was
            infos.append(SeriesInfo(METRICS[metric].canonical, metric, labels))
    points = pl.concat(frames) if frames else empty_points()
    return SeriesSet(tuple(infos), points, str(path))
