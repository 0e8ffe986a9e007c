"""The tuning rules of one rank as a section (``recommendations``): the measured values the rules
compare with their thresholds (:class:`~rightsize.analyzers.diagnosis.advise.Measures`), then
the rules that fire, each with its what-if.

Input: a section's view of one rank (:class:`~rightsize.analyzers.sections.SectionInput`: the
trace, steps, devices, the catalog GPU, HTA's idle time, the peak memory and the verdict).
Output: the rules' :class:`~rightsize.analyzers.document.diagnosis.Recommendation` nodes
(``advise.recommend``); none without a diagnosis. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import polars as pl

from rightsize.analyzers.diagnosis import advise, attention, copies, steady
from rightsize.analyzers.diagnosis.host_work import host_parts, repeat_words
from rightsize.analyzers.document import metrics as dm
from rightsize.analyzers.document.diagnosis import Diagnosis, Recommendation
from rightsize.analyzers.document.sizing import Sizing, Verdict
from rightsize.analyzers.job.fabric import interconnect_advice
from rightsize.analyzers.metrics import tb_plugin
from rightsize.analyzers.metrics.devices import prop
from rightsize.analyzers.metrics.headline import peak
from rightsize.analyzers.metrics.steps import Steps
from rightsize.catalog import Gpu
from rightsize.traces.schema import Trace
from rightsize.vocab import DeviceKind

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput


def recommendations(rank: SectionInput) -> tuple[Recommendation, ...]:
    """Section ``recommendations`` (needs ``step_ranges``, ``device_use``, ``device_match``,
    ``hta``, ``memory_peaks``, ``verdict``, ``sizing``, ``precision``)."""
    diag, work = rank["verdict"].diagnosis, rank["verdict"].work
    if diag is None:
        return ()
    trace, steps, primary = rank.trace, rank.steps, rank.device
    match = rank["device_match"]
    gpu = match.gpu if match is not None else None
    kernels = trace.kernels.filter(pl.col("device") == primary) if primary is not None \
        else trace.kernels.clear()
    top = peak(rank)
    measured, words = _measures(trace, steps, kernels, diag, work,
                                rank["device_use"].device(primary),
                                top.peak_allocated_bytes if top else None,
                                prop(trace, primary, "memory_bytes"), rank["hta"], gpu)
    # the precision section's mix: the same work at the same GPU's architecture
    mix = rank["precision"] \
        if work is not None and work.height and diag.device == DeviceKind.GPU else None
    low = sum(v for k, v in (mix.time_pct if mix else {}).items()
              if k in ("bf16", "fp16", "fp8", "int8", "int4"))
    return tuple(advise.recommend(
        measured, diag.bound, diag.step_ns / steps.count / 1e6, gpu,
        {"host_parts": host_parts(diag.host_work), **repeat_words(diag.host_work),
         **advise.fewer_bytes(gpu, low),
         "interconnect": interconnect_advice(gpu, trace.meta.world_size or 1), **words,
         **smaller_gpu_words(rank["sizing"], gpu)}))


def smaller_gpu_words(sizing: Sizing | None, gpu: Gpu | None) -> dict[str, str]:
    """Where an under-used GPU's advice sends the job, agreeing with the sizing: the GPU it
    recommends when over-provisioned; when it judged the GPU right-sized (no cheaper GPU keeps
    the step within --slower-ok), a MIG slice where the GPU partitions, else a cheaper GPU
    only at a slower step. Without a sizing, the hardware's words (advise.hardware_words)."""
    if sizing is None or sizing.verdict is None:
        return {}
    if sizing.verdict == Verdict.OVER_PROVISIONED and sizing.recommended:
        return {"smaller_gpu": f"the {sizing.recommended} the sizing recommends"}
    slice_ = "a MIG slice of this GPU, or " if gpu is not None and gpu.has_mig else ""
    return {"smaller_gpu": f"{slice_}a cheaper GPU at a slower step (the sizing found none"
            " cheaper that keeps this step within --slower-ok)"}


def _measures(trace: Trace, steps: Steps, kernels: pl.DataFrame, diag: Diagnosis,
              work: pl.DataFrame, dev: dm.DeviceMetrics | None, peak: int | None,
              memory_bytes: int | None, temporal: dm.Hta | None,
              gpu_spec: Gpu | None = None) -> tuple[advise.Measures, dict[str, str]]:
    """The measured values the tuning rules compare with their thresholds, and the words
    some rules' details take from the trace."""
    link_gbs = gpu_spec.host_link_gbs_per_direction if gpu_spec else None
    s = cast(Mapping[str, float], diag.shares_pct)  # diagnose() measures every share
    span = temporal.span_ms if temporal is not None else 0.0
    gpu = diag.device == DeviceKind.GPU
    pageable = copies.large_h2d(trace, "pageable")
    main = main_stream(kernels, temporal.idle_by_stream if temporal is not None else ())
    eager, attention_words = attention.measures(
        attention.find(trace.cpu_ops, kernels, steps.start_ns, steps.end_ns) if gpu else None,
        gpu_spec, diag.step_ns, attention.in_windows_ns(kernels, steps.start_ns, steps.end_ns),
        steps.count)
    fp32_rows = advise.fp32_off_tensor_cores(work) if gpu else None  # once, for both
    fp32 = None if fp32_rows is None else int(fp32_rows["dur_ns"].sum())
    pinned, pinned_steps = copies.pinned_model(trace, steps, pageable, diag, link_gbs) \
        if gpu else ({}, {})
    nvml = diag.utilization.nvml
    hw = diag.host_work
    gpm = nvml.gpm_sm_util_pct_mean if nvml is not None else None
    return (advise.Measures(
        dataloader_pct=s["dataloader"],
        gpu_util_pct=dev.gpu_util_pct if dev is not None else None,
        gpu_idle_pct=100.0 - dev.gpu_util_pct if dev is not None and dev.gpu_util_pct
        is not None else None,
        communication_pct=s["communication"],
        memory_of_device_pct=100.0 * peak / memory_bytes if peak and memory_bytes else None,
        fp32_matmul_pct=_pct(fp32, int(work["dur_ns"].sum())) if gpu else None,
        host_wait_pct=100.0 * main.host_wait_ms / span if span and main else None,
        kernel_wait_pct=100.0 * main.kernel_wait_ms / span if span and main else None,
        pageable_h2d_copies=float(pageable.height) if gpu else None,
        sync_idle_pct=advise.sync_idle_pct(
            trace.cpu_ops, trace.runtime, pl.concat([
                kernels.select("ts_ns", "dur_ns"),
                trace.transfers.filter(pl.col("device") == dev.device).select("ts_ns", "dur_ns")
                if dev is not None else kernels.select("ts_ns", "dur_ns").clear()]),
            steps.start_ns, steps.end_ns, diag.step_ns) if gpu else None,
        fp32_step_pct=_pct(fp32, diag.step_ns) if gpu else None,
        **eager,
        sm_activity_pct=gpm,
        data_parallel_ops=float(advise.data_parallel_ops(trace.cpu_ops)),
        memory_pct=s["memory"],
        pcie_pct=s["pcie"],
        host_idle_pct=s["host"] + s["idle"],
        host_cpu_work_pct=hw.cpu_work_pct if hw is not None else (0.0 if gpu else None),
        repeated_work_pct=sum(c.repeat_pct for c in hw.calls)
        if hw is not None and hw.python_frames else None,
        framework_pct=s["host"] + s["idle"] - (hw.cpu_work_pct + hw.ranges_pct
                                                 if hw is not None else 0.0),
        tracer_pct=hw.framework_pct / 2 if hw is not None and hw.python_frames else None,
        **({"host_rest_pct": s["host"] + s["idle"]} | pinned if gpu else {}),
        per_step_ms=steady.series(diag, steps, pinned_steps, fp32_rows),
        step_numbers=tuple(p.step for p in diag.per_step),
        step_dur_ms=tuple(p.dur_ms for p in diag.per_step),
    ), attention_words)


def _pct(part: int | None, whole: int) -> float | None:
    return None if part is None or whole <= 0 else 100.0 * part / whole


def main_stream(kernels: pl.DataFrame,
                 idle: tuple[dm.StreamIdle, ...]) -> dm.StreamIdle | None:
    """HTA's idle breakdown of the compute stream with the most kernel time: host wait summed
    over streams counts the idle of copy and collective streams too (146-250% of the span on
    shared NCCL traces), and those idle by design."""
    if not idle or kernels.height == 0 or "stream" not in kernels.columns:
        return None
    compute = kernels.filter(~pl.col("name").str.contains(tb_plugin.COMM_KERNEL))
    if compute.height == 0:
        return None
    by = compute.group_by("stream").agg(pl.col("dur_ns").sum()).sort(
        ["dur_ns", "stream"], descending=[True, False])
    stream = by["stream"][0]
    return next((i for i in idle if i.stream == stream), None)
