"""Match two analyses and compute what changed: steps, shares, kernel groups, ops, kernels.

Inputs: two :class:`Side` objects (a typed analysis document, and the primary rank's frames
when the side was analyzed here). Output: a :class:`~.result.Comparison`. Every number comes
from the analysis (the document, or :mod:`.attribution` over the same frames); nothing here
re-derives a metric. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rightsize.analyzers.compare.attribution import UNATTRIBUTED, SideTimes
from rightsize.analyzers.compare.result import (
    Change,
    Comparison,
    ProjectionCheck,
    SideInfo,
    StepChange,
)
from rightsize.analyzers.document import Document
from rightsize.traces.kernel_names import normalize_kernel_name
from rightsize.vocab import DeviceKind

if TYPE_CHECKING:
    import polars as pl

TOP_CHANGES = 10
# What each exclusive share of the step is, as a reason sentence names it.
SHARE_LABELS = {"compute": "compute-bound kernel time", "memory": "memory-bound kernel time",
                "pcie": "exposed PCIe copies", "dataloader": "data-loader wait",
                "communication": "exposed communication", "host": "host time (GPU idle while the host runs)",
                "idle": "unexplained idle"}
GROUP_LABELS = {"gemm": "GEMMs", "attention": "attention kernels", "convolution": "convolutions",
                "elementwise": "elementwise kernels", "normalization": "normalizations",
                "reduction": "reductions", "communication": "collectives"}


@dataclass(frozen=True, slots=True)
class Side:
    path: str
    document: Document
    kernels: pl.DataFrame | None = None  # the primary rank's frames; None for a saved document
    cpu_ops: pl.DataFrame | None = None
    notes: tuple[str, ...] = ()  # what the caller chose (which rank), said in the result
    work: pl.DataFrame | None = None  # the rank's classified device work (FLOPs per kernel)


def _device(doc: Document) -> str:
    dev = doc.primary_device
    if dev is not None and dev.name:
        return dev.name
    return doc.diagnosis.device if doc.diagnosis else "unknown"


def precision_of(doc: Document, work: pl.DataFrame | None = None) -> str | None:
    """The precision the document records (``precision.workload``: the one with the most
    kernel time), else the one with the most time in the analysis's classified work (CPU
    runs), else the one its sizing assumed for the current GPU."""
    if doc.precision is not None and doc.precision.workload:
        return doc.precision.workload
    if work is not None and {"precision", "dur_ns"} <= set(work.columns):
        import polars as pl

        per = (work.filter(pl.col("precision").is_not_null())
               .group_by("precision").agg(pl.col("dur_ns").sum())
               .sort(["dur_ns", "precision"], descending=[True, False]))
        if per.height:
            return str(per["precision"][0])
    if doc.sizing is not None:
        current = doc.sizing.candidate(doc.sizing.current)
        if current is not None:
            return current.precision_used
    return None


def side_info(label: str, side: Side) -> SideInfo:
    doc = side.document
    st = doc.steps
    spread = None
    if st.count >= 2 and st.max_ms is not None and st.min_ms is not None:
        spread = (st.max_ms - st.min_ms) / 2
    diag = doc.diagnosis
    return SideInfo(label, side.path, "trace" if side.kernels is not None else "analysis-json",
                    _device(doc), doc.sizing.current if doc.sizing else None,
                    precision_of(doc, side.work),
                    diag.bound if diag else None, diag.confidence if diag else None,
                    st.count, st.mean_ms, spread, doc.metrics.peak_memory_bytes,
                    dict(diag.shares_pct) if diag else {})


def _step(a: SideInfo, b: SideInfo) -> StepChange:
    noise = None if a.spread_ms is None or b.spread_ms is None else a.spread_ms + b.spread_ms
    sig = None
    if noise is not None and a.step_ms is not None and b.step_ms is not None:
        sig = abs(b.step_ms - a.step_ms) > noise
    return StepChange(a.step_ms, b.step_ms, noise, sig)


def _pair(kind: str, a: Mapping[str, float], b: Mapping[str, float]) -> tuple[Change, ...]:
    names = sorted(set(a) | set(b))
    rows = [Change(kind, n, a.get(n, 0.0), b.get(n, 0.0)) for n in names]
    return tuple(sorted(rows, key=lambda c: (-abs(c.delta_ms), c.name)))


def _ratio_text(label: str, a_ms: float, b_ms: float, where: str) -> str:
    if a_ms > 0 and b_ms > 0:
        r = b_ms / a_ms
        verb = f"{r:.1f}x slower" if r >= 1 else f"{1 / r:.1f}x faster"
        return f"{label} {verb}{where}: {a_ms:.3g} -> {b_ms:.3g} ms/step"
    return f"{label} {'appeared' if b_ms else 'vanished'}: {a_ms:.3g} -> {b_ms:.3g} ms/step"


def _shares(a: SideInfo, b: SideInfo) -> tuple[Change, ...]:
    rows = []
    for key in [k for k in SHARE_LABELS if k in a.shares_pct or k in b.shares_pct]:
        pa, pb = a.shares_pct.get(key), b.shares_pct.get(key)
        if pa is None or pb is None or a.step_ms is None or b.step_ms is None:
            continue
        ma, mb = pa * a.step_ms / 100, pb * b.step_ms / 100
        verb = "rose" if mb > ma else "fell" if mb < ma else "held at"
        label = SHARE_LABELS[key]
        if a.device == DeviceKind.CPU and b.device == DeviceKind.CPU:
            label = label.replace("kernel time", "op time")
        reason = (f"{label} {verb} {ma:.3g} -> {mb:.3g} ms/step "
                  f"({pa:g}% -> {pb:g}% of the step)")
        rows.append(Change("share", key, ma, mb, reason))
    return tuple(sorted(rows, key=lambda c: (-abs(c.delta_ms), c.name)))


def _groups(da: Document, db: Document, a: SideInfo, b: SideInfo,
            peaks: tuple[Mapping[str, float], Mapping[str, float]],
            gpu_alone: bool = True) -> tuple[Change, ...]:
    def per_step(doc: Document) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in doc.diagnosis.signals if doc.diagnosis else ():
            if doc.diagnosis and doc.diagnosis.device == DeviceKind.GPU and s.time_ms is not None:
                name = s.group or ""
                out[name] = out.get(name, 0.0) + s.time_ms / max(doc.steps.count, 1)
        return out

    where = f" on {b.device} vs {a.device}" if a.device != b.device and gpu_alone else ""
    rows = _pair("group", per_step(da), per_step(db))
    out = []
    for c in rows:
        text = _ratio_text(GROUP_LABELS.get(c.name, c.name), c.a_ms, c.b_ms, where)
        pa, pb = peaks[0].get(c.name), peaks[1].get(c.name)
        if pa is not None and pb is not None:
            text += f"; {pb:g}% of peak on B vs {pa:g}% on A"
        out.append(Change(c.kind, c.name, c.a_ms, c.b_ms, text))
    return tuple(out)


def _doc_times(doc: Document) -> tuple[dict[str, float], dict[str, float], str]:
    """Ops and kernels from a document's top tables (per step), and the time basis."""
    steps = max(doc.steps.count, 1)
    gpu = bool(doc.diagnosis and doc.diagnosis.device == DeviceKind.GPU) or bool(doc.top_kernels)
    ops: dict[str, float] = {}
    for op in doc.top_ops:
        v = op.gpu_ms if gpu else op.host_ms
        if v and op.name is not None:  # a lost name matches nothing on the other side
            ops[op.name] = ops.get(op.name, 0.0) + v / steps
    kernels: dict[str, float] = {}
    for k in doc.top_kernels:
        if k.name is None:
            continue
        key = normalize_kernel_name(k.name)
        kernels[key] = kernels.get(key, 0.0) + (k.total_ms or 0.0) / steps
    return ops, kernels, "kernel" if gpu else "host"


def _matched(ours: Mapping[str, float], theirs: Mapping[str, float], total: float) -> float | None:
    if total <= 0:
        return None
    hit = sum(v for k, v in ours.items() if k in theirs and k != UNATTRIBUTED)
    return round(min(hit / total, 1.0) * 100, 1)


# Below this share of either side's time matched to the other, the runs ran different work.
SAME_WORK_MATCHED_PCT = 95.0


def more_than_the_gpu(a: SideInfo, b: SideInfo,
                      matched: Mapping[str, float | None]) -> tuple[str, ...]:
    """What else differs between two runs on different GPUs, which a projection of A onto B's
    GPU does not model: another precision, or work of one side the other does not have."""
    if a.device == b.device:
        return ()
    out = []
    if a.precision and b.precision and a.precision != b.precision:
        out.append(f"precision {a.precision} -> {b.precision}")
    for side, other in (("a", "b"), ("b", "a")):
        pct = matched.get(side)
        if pct is not None and pct < SAME_WORK_MATCHED_PCT:
            out.append(f"{100 - pct:.0f}% of {side.upper()}'s time matches no op of "
                       f"{other.upper()}")
    return tuple(out)


def _projection(da: Document, a: SideInfo, b: SideInfo) -> ProjectionCheck | None:
    if a.device == b.device or b.gpu is None or b.step_ms is None or da.sizing is None:
        return None
    cand = da.sizing.candidate(b.gpu)
    if cand is None or cand.projected_step_ms is None:
        return None
    lo, hi = cand.projected_step_ms_low, cand.projected_step_ms_high
    range_ms = (lo, hi) if lo is not None and hi is not None else None
    return ProjectionCheck(b.gpu, cand.projected_step_ms, b.step_ms, range_ms)


def compare(a: Side, b: Side, frames: tuple[SideTimes, SideTimes] | None,
            peaks: tuple[Mapping[str, float], Mapping[str, float]] = ({}, {})) -> Comparison:
    """The comparison; ``frames`` are both sides' :func:`~.attribution.side_times` when both
    were analyzed here (ops matched by call path), else ``None`` (by the documents' top ops);
    ``peaks`` each side's achieved % of peak per kernel group (:mod:`.rates`)."""
    ia, ib = side_info("A", a), side_info("B", b)
    notes: list[str] = [*a.notes, *b.notes]
    if frames is not None:
        ta, tb = frames
        by_path = ta.has_modules and tb.has_modules
        ops_a, ops_b = (ta.ops_ms, tb.ops_ms) if by_path else (ta.ops_bare_ms, tb.ops_bare_ms)
        kern_a, kern_b, tot_a, tot_b = ta.kernels_ms, tb.kernels_ms, ta.total_ms, tb.total_ms
        basis, matched_by = ta.basis if ta.basis == tb.basis else "mixed", "call-path"
        if not by_path:
            notes.append("ops matched by their outermost ATen op (module names are recorded "
                         "on neither or one side only)")
        for t, side in ((ta, "A"), (tb, "B")):
            if t.inferred_ms:
                notes.append(f"{side}: {t.inferred_ms:.3g} ms/step of kernels had no launching "
                             "op in the trace (launched before the capture) and were charged "
                             "to the op their kernel name ran under elsewhere in it")
    else:
        ops_a, kern_a, basis_a = _doc_times(a.document)
        ops_b, kern_b, basis_b = _doc_times(b.document)
        tot_a, tot_b = sum(ops_a.values()), sum(ops_b.values())
        basis = basis_a if basis_a == basis_b else "mixed"
        matched_by = "top-ops"
        notes.append("a saved analysis has no frames: ops matched by the documents' top-ops "
                     "tables (launching ops, which may nest), matched_pct of what those list")
    matched = {"a": _matched(ops_a, ops_b, tot_a), "b": _matched(ops_b, ops_a, tot_b)}
    by_kernel = {"a": _matched(kern_a, kern_b, tot_a) if kern_a else None,
                 "b": _matched(kern_b, kern_a, tot_b) if kern_b else None}
    differs = more_than_the_gpu(ia, ib, matched)
    shares = _shares(ia, ib)
    groups = _groups(a.document, b.document, ia, ib, peaks, gpu_alone=not differs)
    if differs:
        notes.append(f"the runs differ in more than the GPU ({'; '.join(differs)}): the "
                     "projection of A onto B's GPU is not checked, and no change is put down "
                     "to the GPU alone")
    ops = _pair("op", ops_a, ops_b)
    top = sorted((*shares, *groups, *ops), key=lambda c: (-abs(c.delta_ms), c.kind, c.name))
    if basis == "mixed":
        notes.append("one side ran on a GPU and the other on the CPU: op times are kernel "
                     "time on one side and host time on the other")
    if ia.step_ms is None or ib.step_ms is None:
        notes.append("a side has no step time: the step change is unknown")
    return Comparison(ia, ib, _step(ia, ib), matched_by, matched, basis, ops,
                      _pair("kernel", kern_a, kern_b), groups, shares,
                      tuple(c for c in top if c.delta_ms)[:TOP_CHANGES],
                      None if differs else _projection(a.document, ia, ib), tuple(notes),
                      by_kernel, differs)

