"""The diagnosis' evidence: each item a measured value against a named threshold, with its text.

Inputs: the exclusive shares, the capture facts (``capture``), utilization, the thresholds.
Outputs: :class:`Evidence` items - ``share`` (the share or capture fact the item is about),
``value`` and ``threshold`` (in the unit the text states; None where there is none) and the
sentence shown to users - and the reasons a capture cannot support a verdict
(:func:`inconclusive_reasons`), each saying what to record instead. Ordering uses ``share``
(the verdict's own share first), never the wording. Pure.
"""

from __future__ import annotations

from rightsize.analyzers.diagnosis.capture import Capture
from rightsize.analyzers.diagnosis.roofline import ShapeNote
from rightsize.analyzers.document.diagnosis import Evidence, HostWork, Utilization
from rightsize.analyzers.thresholds import DiagnosisThresholds
from rightsize.vocab import Bound

# the capture fact of a trace filtered or sampled after recording (``Evidence.share``)
FILTERED = "filtered"
STEADY = "profile steady-state steps, e.g. steps 10-15 with torch.profiler.schedule(wait=1, " \
         "warmup=9, active=5)"


def _unrecorded_advice(c: Capture) -> str:
    """What to record when most of the step has nothing recorded, by what the trace holds."""
    if not c.host_recorded:
        return f"record the host side too (activities=[CPU, CUDA]) and {STEADY}"
    # Seen on an H100: an inference loop that sleeps 5 ms between requests, recorded by
    # rightsize run (host ops on): 93% of each step had nothing recorded.
    waiting = ("the host side is recorded, so the job spent that time outside PyTorch ops: "
               "sleeping, waiting for input or requests, I/O")
    if not c.python_recorded:
        return (f"{waiting}, or Python that calls no op; record Python functions too "
                "(with_stack=True; rightsize run --with-stack) to see which, or profile a part "
                "of the job that keeps the device busy")
    if round(c.waiting_pct, 1) > 0:
        return (f"the job waits in blocking calls (sleep, locks, select, sockets) for "
                f"{c.waiting_pct:.1f}% of the step, so the device has no work then; profile a "
                "part of the job that keeps the device busy, or size for the work it has")
    return (f"{waiting} (no recorded Python function covers it either); profile a part of the "
            "job that keeps the device busy, or size for the work it has")


def inconclusive_reasons(c: Capture, util: Utilization,
                         th: DiagnosisThresholds) -> list[Evidence]:
    """Why the capture cannot support a verdict (empty: it can)."""
    out = []
    if c.launches_without_kernels:
        out.append(Evidence(
            "kernels", 0.0, None,
            f"inconclusive: a GPU job ({c.launches_without_kernels} kernel launch calls) with no "
            "GPU kernel recorded (a CUPTI range-profiler or host-only capture): the GPU side is "
            "unknown; record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"))
    if (c.ops_kept_pct is not None and c.ops_kept_pct < th.min_ops_kept_pct
            and c.ids_in_sequence_pct is not None
            and c.ids_in_sequence_pct < th.max_sampled_in_sequence_pct):
        out.append(Evidence(
            FILTERED, c.ops_kept_pct, th.min_ops_kept_pct,
            f"inconclusive: a sampled trace - it holds {c.ops_kept_pct:.1f}% of the host ops "
            f"it numbers (External id), below {th.min_ops_kept_pct:.0f}%, scattered (only "
            f"{c.ids_in_sequence_pct:.0f}% follow the one numbered before): events were "
            "dropped after recording, so what ran between the kept ones is unknown, not idle "
            "or host time; analyze the trace as the profiler wrote it"))
    elif c.ops_kept_pct is not None and c.ops_kept_pct < th.min_ops_kept_cut_pct:
        out.append(Evidence(
            FILTERED, c.ops_kept_pct, th.min_ops_kept_cut_pct,
            f"inconclusive: a cut-down trace - it holds {c.ops_kept_pct:.2f}% of the host ops "
            f"it numbers (External id), below {th.min_ops_kept_cut_pct:.0f}%, in pieces with "
            "the ops between them gone: what ran there (inside the steps too) is unknown, not "
            "idle, host or exposed communication time; analyze the trace as the profiler wrote "
            "it"))
    if 100.0 - c.recorded_pct >= 100.0 - th.min_recorded_pct:
        what = ("has nothing recorded (device idle, no host op, annotated range, runtime call"
                " or Python function)"
                if round(c.waiting_pct, 1) <= 0 else
                "has no work recorded (device idle, host idle or in a blocking call)")
        out.append(Evidence(
            "coverage", c.recorded_pct, th.min_recorded_pct,
            f"inconclusive: {100 - c.recorded_pct:.1f}% of the step {what}: recorded activity "
            f"covers {c.recorded_pct:.1f}%, below the {th.min_recorded_pct:.0f}% a verdict "
            "needs; " + _unrecorded_advice(c)))
    if c.startup_pct >= th.startup_pct:
        top = ", ".join(f"{n} {ms:,.0f} ms" for n, ms in c.startup_top)
        out.append(Evidence(
            "startup", c.startup_pct, th.startup_pct,
            f"inconclusive: cold start - {c.startup_pct:.1f}% of the step is process start-up "
            f"(GPU initialisation, JIT compilation, autotuning, warm-up: {top}), at or above "
            f"{th.startup_pct:.0f}%; a steady-state step does not repeat it: skip the first "
            f"step and {STEADY}"))
    if c.kernels is not None and not c.launches_without_kernels \
            and c.kernels < th.min_kernels:
        out.append(Evidence(
            "kernels", float(c.kernels), float(th.min_kernels),
            f"inconclusive: only {c.kernels} kernel(s) in {c.steps} step(s), fewer than "
            f"{th.min_kernels}: too little device work to judge a workload by; {STEADY} of the "
            "full training or inference loop"))
    nvml, trace_u = util.nvml, util.trace
    if (nvml is not None and nvml.samples >= th.min_nvml_samples
            and nvml.gpu_util_pct_mean is not None and trace_u is not None):
        gap = abs(nvml.gpu_util_pct_mean - trace_u.gpu_busy_pct_mean)
        if gap > th.signals_disagree_pct:
            out.append(Evidence(
                "utilization", gap, th.signals_disagree_pct,
                f"inconclusive: NVML utilization.gpu {nvml.gpu_util_pct_mean:.1f}% and the "
                f"trace's {trace_u.gpu_busy_pct_mean:.1f}% busy disagree by {gap:.1f} points "
                f"(> {th.signals_disagree_pct:.0f}): another process may share the GPU or the "
                "trace missed work; profile again with the GPU to itself"))
    return out


def findings(shares: dict[str, float], busy: float, bound: Bound | None,
             signal_pct: dict[str, float], util: Utilization, on_gpu: bool,
             c: Capture, notes: tuple[ShapeNote, ...],
             th: DiagnosisThresholds, host: HostWork | None = None) -> list[Evidence]:
    """The measured evidence, the verdict's own share first."""
    what = "GPU" if on_gpu else "CPU"
    line = "≥" if busy >= th.work_bound_pct else "<"
    ev = [Evidence(
        "compute" if shares["compute"] >= shares["memory"] else "memory", busy,
        th.work_bound_pct,
        f"{what} busy with work {busy:.1f}% of the step ({line} {th.work_bound_pct:.0f}%: "
        + ("the work itself bounds the step)" if line == "≥"
           else "the step is limited by what the device waits for)")
        + f"; compute-bound {shares['compute']:.1f}%, memory-bound {shares['memory']:.1f}%")]
    if shares["dataloader"] > 0:
        flag = " (above" if shares["dataloader"] > th.dataloader_pct else " (below"
        ev.append(Evidence("dataloader", shares["dataloader"], th.dataloader_pct,
                           f"data-loader wait exposed {shares['dataloader']:.1f}% of the step"
                           f"{flag} the TensorBoard plugin's {th.dataloader_pct:.0f}% threshold)"))
    if shares["host"] + shares["idle"] > 0:
        empty = ("nothing recorded" if round(c.waiting_pct, 1) <= 0 else
                 f"nothing recorded or waiting ({c.waiting_pct:.1f}% in sleep, locks, select)")
        text = (f"GPU idle while the host runs Python, ops, launches and annotated ranges: "
                f"{shares['host']:.1f}% "
                f"of the step{_split(host)}; idle with {empty} {shares['idle']:.1f}%" if on_gpu else
                f"framework overhead (Python, op dispatch, ops under {th.tiny_op_us:.0f} us): "
                f"{shares['host']:.1f}% of the step; {empty} {shares['idle']:.1f}%")
        ev.append(Evidence("host", shares["host"] + shares["idle"], None, text))
    ev.extend(_calls(host, shares))
    if shares["pcie"] > 0:
        ev.append(Evidence("pcie", shares["pcie"], None, "host<->device copies not hidden "
                           f"under kernels: {shares['pcie']:.1f}% of the step"))
    if shares["communication"] > 0:
        flag = "above" if shares["communication"] > th.communication_pct else "below"
        ev.append(Evidence("communication", shares["communication"], th.communication_pct,
                           f"exposed communication {shares['communication']:.1f}% of the step "
                           f"({flag} the TensorBoard plugin's {th.communication_pct:.0f}% "
                           "threshold)"))
    if signal_pct:
        parts = ", ".join(f"{s} {p:.0f}%" for s, p in sorted(signal_pct.items(),
                                                            key=lambda x: -x[1]))
        ev.append(Evidence("signals", max(signal_pct.values()), None,
                           f"compute/memory split of the work decided by: {parts}"))
    if notes:
        shown = "; ".join(f"{n.op}: {n.reason}" for n in notes[:3])
        ev.append(Evidence("signals", float(len(notes)), None,
                           f"the roofline could not use the recorded shapes of {len(notes)} op "
                           f"signature(s), left to the next signal ({shown})"))
    ev.extend(_steps(c, bound))
    ev.extend(_utilization(util, th))
    if bound is not None:
        key = "host" if bound is Bound.HOST else bound.value
        ev.sort(key=lambda e: 0 if e.share == key else 1)
    return ev


def _steps(c: Capture, bound: Bound | None) -> list[Evidence]:
    if bound is Bound.INCONCLUSIVE:
        return []
    if c.steps == 1:
        return [Evidence("steps", 1.0, None, "one step recorded: enough for a verdict after "
                         f"warm-up, with lower confidence; {STEADY} to see step-to-step variation")]
    return [Evidence("steps", c.step_cv * 100, None,
                     f"{c.steps} steps, step time varies {c.step_cv * 100:.1f}% "
                     "(standard deviation / mean)")]


def _utilization(util: Utilization, th: DiagnosisThresholds) -> list[Evidence]:
    trace_u, nvml = util.trace, util.nvml
    if trace_u is None or nvml is None or nvml.gpu_util_pct_mean is None:
        return []
    gap = nvml.gpu_util_pct_mean - trace_u.gpu_busy_pct_mean
    n = nvml.samples
    note = (f"NVML utilization.gpu {nvml.gpu_util_pct_mean:.1f}% (peak "
            f"{nvml.gpu_util_pct_peak or 0:.0f}%, {n} sample{'s' if n != 1 else ''} averaging "
            f"step time only) vs {trace_u.gpu_busy_pct_mean:.1f}% of the step with a kernel "
            "running in the trace")
    if abs(gap) > th.disagreement_pct:
        note += (" - they disagree: NVML counts a sample period busy when any kernel ran in "
                 "it, and samples at its own rate")
    return [Evidence("utilization", abs(gap), th.disagreement_pct, note)]


def _split(host: HostWork | None) -> str:
    """The host share's split, in words: the job's CPU work (by library), the annotated
    ranges with nothing finer recorded (by name), and overhead; a part under 1% of the step
    is not worth the words."""
    if host is None:
        return ""
    said = []
    if host.cpu_work_pct >= 1.0:
        parts = ", ".join(f"{p.name} {p.pct:.1f}%" for p in host.parts[:3])
        said.append(f"the job's own CPU work {host.cpu_work_pct:.1f}%: {parts}")
    if host.ranges_pct >= 1.0:
        said.append(f"inside recorded ranges with nothing finer recorded "
                    f"{host.ranges_pct:.1f}%: {', '.join(host.ranges)}")
    if not said:
        return ""
    return f" ({'; '.join(said)}; framework and launch overhead {host.framework_pct:.1f}%)"


def _calls(host: HostWork | None, shares: dict[str, float]) -> list[Evidence]:
    """The library call owning the most CPU time while the GPU waits, and its repeats; about
    the data loader's share when the wait is mostly the loader's."""
    if host is None or not host.calls or host.calls[0].pct < 1.0:
        return []
    c = host.calls[0]
    called = f", called from {c.caller}" if c.caller else ""
    again = (f", {c.per_step:g} times a step with the same call stack ({c.repeat_pct:.1f}% in "
             "all but one)" if c.repeat_pct > 0 else "")
    share = "dataloader" if shares["dataloader"] >= shares["host"] else "host"
    return [Evidence(share, c.pct, None,
                     f"the job's own CPU work while the GPU waits, by the call that owns it: "
                     f"{c.call} ({c.library}{called}) {c.pct:.1f}% of the step{again}")]
