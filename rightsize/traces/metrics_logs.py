"""GPU metric logs -> GPU_SAMPLES: nvidia-smi ``--query-gpu`` CSV, dcgm-exporter, dcgmi dmon.

Role: let a run be diagnosed from counters alone, or beside a trace. Detects which of the three
text formats a file holds and converts it into :data:`rightsize.traces.samples.GPU_SAMPLES`
(percent 0-100, bytes, watts, MHz, ``t_ns`` epoch ns).

nvidia-smi (``--query-gpu=timestamp,index,utilization.gpu,... --format=csv[,noheader][,nounits]
-l N`` / ``-lms N``): the header names the fields with units (``memory.used [MiB]``); values may
carry units too (``1024 MiB``) unless ``nounits``. ``[N/A]``/``[Not Supported]`` are null.
Timestamps (``2024/05/01 12:00:00.123``) are local time without a zone: pass ``timezone``
(e.g. "Europe/Berlin") to place them, else they are read as UTC. A ``noheader`` log needs
``fields`` (the ``--query-gpu`` list); units then default to nvidia-smi's (MiB, W, MHz, %).
Without an ``index`` column GPUs are numbered by first appearance of their uuid / bus id, else
by their place in each sampling round (a round may straddle two timestamps: ``_by_round``).
Text is NFKC-normalized first, so full-width digits (``５０ %``, an edited or converted log)
read as the numbers they are; a row whose ``index`` is not a number (``x``) is left out, and a
log with no row left says so in one line.

DCGM formats: see :mod:`rightsize.traces.dcgm_logs` (scrape time, dmon start and interval).

Inputs: a path plus the clock facts the file lacks. Outputs: a GPU_SAMPLES frame.
Errors: :class:`rightsize.errors.InputError` with one line.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from rightsize.errors import InputError
from rightsize.traces import dcgm_logs, limits
from rightsize.traces.readers import SAMPLES, Progress, Read, ReadOptions, SmallInput
from rightsize.traces.samples import conform_samples

__all__ = ["READER", "looks_like_metrics_log", "metrics_log_kind", "read_metrics_log"]

MIB = 1024 * 1024
# nvidia-smi query field -> (GPU_SAMPLES column, nvidia-smi's default unit).
NVSMI_FIELDS: dict[str, tuple[str, str]] = {
    "timestamp": ("t", ""),
    "index": ("gpu_index", ""),
    "uuid": ("gpu_uuid", ""),
    "gpu_uuid": ("gpu_uuid", ""),
    "pci.bus_id": ("bus_id", ""),
    "gpu_bus_id": ("bus_id", ""),
    "utilization.gpu": ("gpu_util_pct", "%"),
    "utilization.memory": ("mem_util_pct", "%"),
    "memory.used": ("mem_used_bytes", "MiB"),
    "memory.total": ("mem_total_bytes", "MiB"),
    "power.draw": ("power_w", "W"),
    "power.draw.instant": ("power_w", "W"),
    "power.draw.average": ("power_w", "W"),
    "power.limit": ("power_limit_w", "W"),
    "enforced.power.limit": ("power_limit_w", "W"),
    "temperature.gpu": ("temperature_c", "C"),
    "clocks.sm": ("sm_clock_mhz", "MHz"),
    "clocks.current.sm": ("sm_clock_mhz", "MHz"),
    "clocks.mem": ("mem_clock_mhz", "MHz"),
    "clocks.current.memory": ("mem_clock_mhz", "MHz"),
    "pcie.link.gen.current": ("pcie_link_gen", ""),
    "pcie.link.gen.gpucurrent": ("pcie_link_gen", ""),
    "pcie.link.width.current": ("pcie_link_width", ""),
    "pcie.link.gen.max": ("pcie_link_gen_max", ""),
    "pcie.link.width.max": ("pcie_link_width_max", ""),
    "clocks_event_reasons.active": ("clocks_event_reasons", ""),
    "clocks_throttle_reasons.active": ("clocks_event_reasons", ""),
}
# Unit -> factor to the column's unit (bytes, W, MHz, %).
_UNIT_FACTORS = {
    "": 1.0,
    "%": 1.0,
    "W": 1.0,
    "mW": 1e-3,
    "MHz": 1.0,
    "GHz": 1e3,
    "C": 1.0,
    "B": 1.0,
    "KiB": 1024.0,
    "MiB": float(MIB),
    "GiB": float(1024**3),
}
_HEADER_FIELD = re.compile(r"([a-z_.]++)\s*+(?:\[([^\]]*+)\])?")  # of a stripped field
_NVSMI_ROW = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s*,", re.MULTILINE)
_DCGM = re.compile(r"^(?:# (?:HELP|TYPE) )?(?:DCGM_FI_|dcgm_)\w+", re.MULTILINE)
_DMON = re.compile(r"^#\s*Entity", re.MULTILINE)
_VALUE = re.compile(r"^(?P<num>0x[0-9a-fA-F]+|-?\d+(?:\.\d*)?)\s*(?P<unit>[A-Za-z%]+)?$")
_NVSMI_TIME = "%Y/%m/%d %H:%M:%S%.f"
SUPPORTED = "nvidia-smi --query-gpu CSV, dcgm-exporter scrape or dcgmi dmon output"


def _nvsmi_header(line: str) -> list[tuple[str, str | None]] | None:
    """[(field, unit)] when ``line`` is an nvidia-smi CSV header with a known field, else None."""
    parsed = []
    for part in line.split(","):
        match = _HEADER_FIELD.fullmatch(part.strip())
        if not match:
            return None
        parsed.append((match[1], match[2]))
    return parsed if any(f in NVSMI_FIELDS for f, _ in parsed) else None


def metrics_log_kind(head: bytes) -> str | None:
    """ "nvidia-smi", "dcgm-exporter", "dcgmi-dmon" or None for the text in ``head``."""
    text = head.decode("utf-8", errors="replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if _nvsmi_header(first) or _NVSMI_ROW.search(text):
        return "nvidia-smi"
    if _DMON.search(text):
        return "dcgmi-dmon"
    if _DCGM.search(text):
        return "dcgm-exporter"
    return None


def looks_like_metrics_log(head: bytes) -> bool:
    """True when ``head`` (the file's first bytes) is one of the supported metric logs."""
    return metrics_log_kind(head) is not None


class MetricsLogReader(SmallInput):
    """The loader's entry for GPU metric logs (:class:`rightsize.traces.readers.Reader`)."""

    name = "metrics-log"
    described = "nvidia-smi --query-gpu CSV, dcgm-exporter scrape or dcgmi dmon log"
    contributes = SAMPLES
    suffixes = (".csv", ".prom", ".log", ".txt")  # .txt: by its head (registry)

    def detect(self, path: Path, head: bytes) -> bool:
        return looks_like_metrics_log(head)

    def read(self, path: Path, options: ReadOptions, progress: Progress | None) -> Read:
        frame = read_metrics_log(path, timezone=options.timezone)
        if frame.is_empty():
            raise InputError(path, "a GPU metrics log without samples")
        return Read(entry={"samples": frame.height}, gpu_samples=frame)


READER = MetricsLogReader()


def _value_expr(column: str, header_unit: str | None, default_unit: str, target: str) -> pl.Expr:
    """Parse one nvidia-smi column: unit from the value, else the header, else the default."""
    raw = pl.col(column).str.strip_chars()
    parts = raw.str.extract_groups(_VALUE.pattern)
    unit = parts.struct.field("unit").fill_null(
        header_unit if header_unit is not None else default_unit
    )
    factor = unit.replace_strict(_UNIT_FACTORS, default=None, return_dtype=pl.Float64)
    num = parts.struct.field("num")
    if target == "clocks_event_reasons":  # a hex bitmask, "0x0000000000000004"
        return num.str.strip_prefix("0x").str.to_integer(base=16, strict=False).alias(target)
    return (num.cast(pl.Float64, strict=False) * factor).alias(target)


def read_nvidia_smi(
    path: Path, text: str, fields: Sequence[str] | None, timezone: str | None
) -> pl.DataFrame:
    """An nvidia-smi ``--query-gpu`` CSV log -> GPU_SAMPLES (rules in the module docstring)."""
    text = unicodedata.normalize("NFKC", text)  # full-width digits are digits
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = _nvsmi_header(lines[0]) if lines else None
    if header is not None:
        lines = lines[1:]
    elif fields:
        header = [(f.strip(), None) for f in fields]
    else:
        raise InputError(path, "nvidia-smi CSV without a header: pass its --query-gpu field list")
    names = [f"c{i}" for i in range(len(header))]
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)]
    rows = [r + [""] * (len(names) - len(r)) for r in rows if r != [f for f, _ in header]]
    frame = pl.DataFrame([r[: len(names)] for r in rows], schema=names, orient="row")
    exprs = []
    for name, (field, unit) in zip(names, header, strict=True):
        if field not in NVSMI_FIELDS:
            continue
        target, default_unit = NVSMI_FIELDS[field]
        if target == "t":
            stamp = (
                pl.col(name)
                .str.strip_chars()
                .str.to_datetime(_NVSMI_TIME, strict=False, time_unit="ns")
            )
            if timezone:
                stamp = stamp.dt.replace_time_zone(timezone, ambiguous="earliest")
            exprs.append(stamp.dt.epoch("ns").alias("t_ns"))
        elif target in ("gpu_uuid", "bus_id"):
            exprs.append(pl.col(name).str.strip_chars().alias(target))
        else:
            exprs.append(_value_expr(name, unit, default_unit, target))
    out = frame.select(exprs) if exprs else frame.select([])
    if "gpu_index" not in out.columns:
        out = out.with_columns(gpu_index=_gpu_order(out))
    else:
        out = _with_gpu_index(path, out, frame[names[[f for f, _ in header].index("index")]])
    return conform_samples("gpu", out.with_columns(source=pl.lit("nvidia-smi")))


def _with_gpu_index(path: Path, out: pl.DataFrame, raw: pl.Series) -> pl.DataFrame:
    """The rows whose ``index`` is a whole number; none: a one-line error naming a bad one."""
    index = out["gpu_index"]
    good = index.is_not_null() & (index >= 0) & (index == index.floor())
    if good.all():
        return out
    if not good.any():
        bad = str(raw.filter(~good)[0]).strip()
        raise InputError(path, f"no row has a GPU index: the index column holds {bad[:40]!r}, "
                               "not a number")
    return out.filter(good)


def _gpu_order(out: pl.DataFrame) -> pl.Expr:
    """GPU number by first appearance of its uuid / bus id, else its place in its round
    (:func:`_by_round`)."""
    for key in ("gpu_uuid", "bus_id"):
        if key in out.columns:
            order = {v: i for i, v in enumerate(out[key].unique(maintain_order=True).to_list())}
            return pl.col(key).replace_strict(order, default=None, return_dtype=pl.Int32)
    if "t_ns" in out.columns and out["t_ns"].null_count() < out.height:
        return pl.lit(pl.Series(_by_round(out["t_ns"].to_numpy()), dtype=pl.Int32))
    return pl.lit(0, dtype=pl.Int32)


ROUND_GAP_NS = 50_000_000  # rows of one round are read within ms; rounds -l/-lms apart


def _by_round(t: np.ndarray) -> np.ndarray:
    """GPU numbers of a log with no index, uuid or bus id: nvidia-smi writes one row per GPU
    per round, in the same order every round, each stamped when that GPU was read, so a round
    may straddle two stamps (numbering by place within a stamp put 16.6% of a real 8-GPU log's
    rows on the wrong GPU). A round starts where the time jumps by ``ROUND_GAP_NS`` or more
    (half the median jump when the log loops faster); its rows are GPUs 0, 1, ... in order,
    and a round longer than the usual one (two merged) counts on modulo the usual size."""
    n = len(t)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    dt = np.diff(np.nan_to_num(t.astype(float), nan=0.0))
    jumps = dt[dt >= ROUND_GAP_NS]
    gap = ROUND_GAP_NS if len(jumps) else (0.5 * float(np.median(dt[dt > 0]))
                                           if (dt > 0).any() else np.inf)
    starts = np.concatenate(([0], np.nonzero(dt >= gap)[0] + 1))
    sizes = np.diff(np.concatenate((starts, [n])))
    usual = int(np.bincount(sizes).argmax())
    place = np.arange(n) - np.repeat(starts, sizes)
    return place % max(usual, 1)


def read_metrics_log(
    path: str | Path,
    *,
    fields: Sequence[str] | None = None,
    timezone: str | None = None,
    scrape_time_ns: int | None = None,
    start_ns: int | None = None,
    interval_ms: float | None = None,
) -> pl.DataFrame:
    """Read an nvidia-smi / dcgm-exporter / dcgmi dmon log into GPU_SAMPLES rows.

    ``fields``: the ``--query-gpu`` list of a ``noheader`` nvidia-smi log. ``timezone``: the
    zone of nvidia-smi's local timestamps (None = UTC). ``scrape_time_ns``: the time of a
    scrape whose samples carry no timestamp. ``start_ns``/``interval_ms``: the start and the
    ``-d`` delay of a dcgmi dmon capture (it prints no times; without them ``t_ns`` is null).
    """
    path = Path(path)
    data = limits.read_bytes(path)
    if not data.strip():
        raise InputError(path, "empty file")
    kind = metrics_log_kind(data[:65536])
    text = data.decode("utf-8", errors="replace")
    try:
        if kind == "nvidia-smi":
            return read_nvidia_smi(path, text, fields, timezone)
        if kind == "dcgm-exporter":
            return dcgm_logs.read_prometheus(text, scrape_time_ns)
        if kind == "dcgmi-dmon":
            return dcgm_logs.read_dmon(text, start_ns, interval_ms)
    except pl.exceptions.PolarsError as exc:
        problem = " ".join(str(exc).split())[:160]
        raise InputError(path, f"unreadable {kind} log ({problem})") from exc
    raise InputError(path, f"not a supported GPU metrics log ({SUPPORTED})")
