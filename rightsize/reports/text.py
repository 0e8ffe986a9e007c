"""The terminal renderer: verdict first, compact, colors only when the caller says (a TTY).

Input: a :class:`~rightsize.reports.model.ReportModel` (or, through :func:`render_text`, the
typed analysis document). Output: text. :func:`render_summary` is the few lines printed
at the end of ``run``/``analyze``/``report``: verdict, top three pieces of evidence, recommended
GPU, report path. :func:`render_model` adds the details (``--format text``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rightsize.analyzers.document import Document
from rightsize.reports import fmt
from rightsize.reports.job_view import text_lines
from rightsize.reports.model import ReportModel, build_model
from rightsize.reports.sections import Headline

_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"
Style = Callable[[str], str]
# Every string that comes from data (kernel and device names, paths, notes) passes through this
# before it is printed: control characters become visible escapes (issue 12).
safe = fmt.safe_line


def _styles(color: bool) -> tuple[Style, Style]:
    if not color:
        return (lambda s: s), (lambda s: s)
    return (lambda s: f"{_BOLD}{s}{_RESET}"), (lambda s: f"{_DIM}{s}{_RESET}")


def render_text(doc: Document, color: bool = False) -> str:
    """``rightsize analyze --format text``: the summary, then the details."""
    return render_model(build_model(doc), color=color)


def render_model(model: ReportModel, color: bool = False) -> str:
    return render_summary(model, None, color=color) + "\n" + _details(model, color)


def render_summary(
    model: ReportModel, report_path: str | Path | None = None, color: bool = False
) -> str:
    b, dim = _styles(color)
    h = model.headline
    lines = []
    if h.bound:
        verdict = f"Verdict: {h.bound}" + ("" if h.bound == "inconclusive" else "-bound")
        extra = f" (confidence {fmt.num(h.confidence)})"
        if h.verdict:
            extra += f"; GPU {h.verdict}"
        lines.append(b(verdict) + extra)
    elif h.verdict:
        lines.append(b(f"Verdict: GPU {h.verdict}") + dim(" (no bottleneck diagnosis)"))
    else:
        lines.append(b("Verdict: n/a") + dim(" (no diagnosis in this analysis)"))
    if h.win_line:
        lines.append(b("Biggest win: ") + safe(h.win_line))
    for ev in model.evidence.items[:3]:
        lines.append(f"  - {safe(ev)}")
    device = safe(h.device_name or ("GPU metric samples, no trace" if h.from_samples
                                    else "no GPU in the trace"))
    lines.append(
        b("Now: ")
        + f"{device}, {fmt.ms(h.step_ms)} per step"
        + (
            f", {fmt.usd_per_steps(h.usd_per_1k_steps_now)}"
            if h.usd_per_1k_steps_now is not None
            else ""
        )
    )
    if h.recommended_gpu:
        gpu = (
            f"{h.recommended_gpus} x {h.recommended_gpu}"
            if h.recommended_gpus > 1
            else h.recommended_gpu
        )
        gpu = safe(gpu)
        lines.append(
            b("Recommended GPU: ") + f"{gpu}{_slower(h)}, {fmt.ms(h.projected_step_ms)} per step"
            f"{_range(h)}, {fmt.usd_per_steps(h.usd_per_1k_steps_recommended)}"
            + (f" (saves {fmt.pct(h.savings_pct)})" if h.savings_pct else "")
        )
        if h.reason:  # the sizing's own why, e.g. "a bigger GPU will not shrink it: do X"
            lines.append(b("Why: ") + safe(h.reason))
    else:
        lines.append(b("Recommended GPU: ") + ("none; " + safe(h.reason) if h.reason
                                               else "n/a (no sizing in this analysis)"))
    text = wrap(lines)
    if report_path is not None:  # never wrapped: a path is pasted whole
        text += "\n" + b("Report: ") + safe(report_path)
    return text + "\n"


def terminal_width() -> int:
    """The terminal's columns; 80 when piped or unknown (``COLUMNS`` wins, as in the shell)."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def wrap(lines: list[str], width: int | None = None) -> str:
    """Each line wrapped to ``width`` (the terminal's), continuation lines indented under the
    text of a ``- `` item or a ``Label: ``. Long words (paths) are never broken."""
    import textwrap

    width = width or terminal_width()
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        stripped = line.lstrip(" ")
        indent = " " * (len(line) - len(stripped) + (2 if stripped.startswith("- ") else 4))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                                 break_on_hyphens=False) or [line])
    return "\n".join(out)


def _range(h: Headline) -> str:
    """The projection's range (its validation error), e.g. " (range 4.80-5.40 ms)"."""
    if h.projected_low_ms is None or h.projected_high_ms is None:
        return ""
    return f" (range {fmt.ms_range(h.projected_low_ms, h.projected_high_ms)})"


def _details(model: ReportModel, color: bool) -> str:
    b, dim = _styles(color)
    o = model.overview
    lines = [
        b("Steps: ") + f"{o.steps} ({safe(o.step_source)}), mean {fmt.ms(o.mean_ms)}, "
        f"min {fmt.ms(o.min_ms)}, max {fmt.ms(o.max_ms)}"
    ]
    if model.step_split.summary:  # one compact line: the HTML has the per-step chart
        lines.append(b("Per step: ") + safe(model.step_split.summary))
    lines.append(
        b("GPU: ") + f"utilization {fmt.pct(o.gpu_util_pct)}, "
        f"est. SM efficiency {fmt.pct(o.sm_efficiency_pct)}, "
        f"est. achieved occupancy {fmt.pct(o.achieved_occupancy_pct)}, "
        f"tensor-core kernels {fmt.pct(o.tensor_core_kernel_pct)} "
        f"({fmt.pct(o.tensor_core_kernel_pct_extended)} with newer names)"
    )
    if model.evidence.shares:
        lines.append(
            b("Exclusive shares: ")
            + ", ".join(f"{safe(s.name)} {fmt.pct(s.pct)}" for s in model.evidence.shares)
        )
    bd = model.breakdown
    if bd.rows:
        lines.append(
            b("Step time breakdown") + dim(" (TensorBoard plugin definition, mean per step)")
        )
        for r in bd.rows:
            pct = r.pct or 0.0
            lines.append(f"  {safe(r.key):<14}{r.ms:>12,.3f} ms {pct:6.1f}%  {'#' * round(pct / 4)}")
    if bd.hta:
        lines.append(
            b("GPU time")
            + dim(" (HTA temporal breakdown)")
            + ": "
            + ", ".join(f"{safe(v.name.lower())} {safe(v.value)}" for v in bd.hta)
        )
    mem = model.memory
    cap = f" of {fmt.nbytes(mem.capacity_bytes)}" if mem.capacity_bytes else ""
    lines.append(b("Peak memory: ") + fmt.nbytes(mem.peak_allocated_bytes) + cap)
    for c in o.memcpy[:4]:
        lines.append(
            f"  memcpy {safe(c.direction)} {safe(c.host_memory or '')}: {c.count} copies, "
            f"{fmt.nbytes(c.bytes)}, {fmt.ms(c.time_ms, 3)}, {fmt.num(c.gbps, 1)} GB/s"
        )
    if model.kernels:
        lines.append(b("Top kernels"))
        for k in model.kernels[:5]:
            kind = f"  [{safe(k.kind)}]" if k.kind else ""
            lines.append(
                f"  {fmt.pct(k.pct):>6}  {fmt.ms(k.total_ms, 3):>12}  {k.calls:>6}x  "
                f"{safe(fmt.short(k.name, max(20, terminal_width() - 50)))}{kind}"
            )
    if model.ops and model.ops[0].self_ms is not None:
        lines.append(b("Top ops by self time") + dim(" (own time, without the ops they call)"))
        # by the column shown (the document orders by GPU time first, which this list omits)
        for op in sorted(model.ops, key=lambda o: -(o.self_ms or 0.0))[:5]:
            caller = f"  (in {op.path[-1]})" if op.path else ""
            lines.append(
                f"  {fmt.ms(op.self_ms, 3):>12}  {op.calls:>6}x  "
                f"{safe(fmt.short(op.name + caller, max(20, terminal_width() - 30)))}"
            )
    for t in model.sections:
        lines.append(b(safe(t.title)))
        lines.append("  " + "  ".join(safe(h) for h in t.headers))
        lines.extend("  " + "  ".join(safe(fmt.short(c, 60)) for c in row) for row in t.rows[:5])
    job = text_lines(model.job)  # several ranks of one job
    if job:
        lines.append(b(job[0]))
        lines.extend(safe(line) for line in job[1:])
    if model.recommendations:
        lines.append(b("Recommendations") + dim(" (the fix, and the step it predicts)"))
        for rec in model.recommendations[:5]:
            lines.append(f"  - {safe(rec.title)}")
            lines.append(f"    {safe(rec.detail)}")
            if rec.what_if:
                lines.append(f"    {fmt.what_if(rec.what_if)}: {safe(rec.what_if.assumes)}")
    lines.extend(dim(f"note: {safe(n)}") for n in model.provenance.notes)
    return wrap(lines) + "\n"


def _slower(h: Headline) -> str:
    """" (1.2x slower)" when the recommended GPU is slower than the measured step (sizing)."""
    if not h.step_ms or not h.projected_step_ms or h.recommended_gpu == h.current_gpu:
        return ""
    ratio = h.projected_step_ms / h.step_ms
    return f" ({ratio:.1f}x slower)" if ratio >= 1.05 else ""
