"""Every threshold that shapes a verdict, a rule, a sizing or a fleet recommendation: one table.

Each threshold is a field of one frozen group below, declared with :func:`limit`: its value,
the one-line reason it is that value, where it comes from when borrowed (STYLE rule 5), and the
label a report shows for it. :data:`TABLE` lists the groups; :func:`label` gives a threshold's
label from the same metadata, and :func:`markdown` writes docs/thresholds.md (a test checks the
page against it). The diagnosis group is published as the document's ``diagnosis.thresholds``.
Pure; imports nothing of rightsize.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

WHY, SOURCE, LABEL = "why", "source", "label"
HOUR_S = 3600.0
DAY_S = 86400.0


def limit(value: Any, why: str, *, label: str = "", source: str = "") -> Any:
    """A threshold field: ``value``, the reason, the label reports show, the source."""
    return field(default=value, metadata={WHY: why, SOURCE: source, LABEL: label})


@dataclass(frozen=True, slots=True)
class DiagnosisThresholds:
    """The verdict's line and what makes a capture inconclusive (``diagnosis/verdict.py``,
    ``evidence.py``; the document's ``diagnosis.thresholds``)."""

    work_bound_pct: float = limit(
        60.0, "the work bounds the step when it takes at least 1.5x the time spent waiting; "
        "below, removing the largest wait shortens the step more than faster kernels",
        label="Work bounds the step from (% of the step busy)")
    dataloader_pct: float = limit(5.0, "data loading above 5% of the step is worth fixing",
                                  label="Data-loader wait worth fixing above (% of the step, "
                                  "TensorBoard plugin)", source="TensorBoard plugin")
    communication_pct: float = limit(
        10.0, "exposed communication above 10% of the step is worth fixing",
        label="Exposed communication worth fixing above (% of the step, TensorBoard plugin)",
        source="TensorBoard plugin")
    gpu_util_pct: float = limit(50.0, "GPU utilization under 50% is low",
                                label="Low GPU utilization below (%, TensorBoard plugin)",
                                source="TensorBoard plugin")
    disagreement_pct: float = limit(
        15.0, "an NVML vs trace utilization gap worth a line of evidence",
        label="NVML vs trace utilization gap worth reporting (points)")
    tiny_op_us: float = limit(10.0, "CPU-only: ops this short are mostly dispatch overhead",
                              label="CPU-only: ops shorter than this are dispatch overhead (µs)")
    cpu_ridge_flops_per_byte: float = limit(
        10.0, "CPU-only: assumed ridge point, ~1-2 TFLOP/s fp32 over ~100-200 GB/s of a server "
        "CPU", label="CPU-only: assumed ridge point (FLOP per byte)")
    min_recorded_pct: float = limit(
        50.0, "below half the step recorded, the unrecorded part could hold any bottleneck",
        label="Inconclusive when less of the step is recorded (%)")
    startup_pct: float = limit(
        25.0, "start-up work (init, JIT, autotuning, warm-up) a steady-state step never "
        "repeats: from a quarter of the step it outweighs any share but the largest",
        label="Inconclusive when start-up work (init, compile, autotune) fills (% of the step)")
    min_ops_kept_pct: float = limit(
        50.0, "PyTorch numbers every host op it records: a trace keeping under half of the ids "
        "in its range (a partly used block of ids per thread aside) was filtered or sampled "
        "after recording, so the time between the kept events is unknown, not idle",
        label="Inconclusive when a trace keeps fewer of its recorded host ops (%)")
    max_sampled_in_sequence_pct: float = limit(
        50.0, "with under min_ops_kept_pct of its ids kept, a trace is sampled when they are "
        "scattered too: few follow the id before them (HTA's sampled ranks: 38%; unfiltered "
        "traces 93-100%, traces built by hand or cut into whole pieces run in sequence)",
        label="Inconclusive, with few host ops kept, when fewer of them are in sequence (%)")
    min_ops_kept_cut_pct: float = limit(
        1.0, "a trace keeping under 1 in 100 of the ids in its range lost most of what was "
        "recorded, in sequence or not: HTA's CPU-only rank 34 keeps 0.26% in four runs (Kineto's "
        "Ev Idx 0-5, then 7,470-7,478: its 210 ms step holds no op of its main thread); every "
        "unfiltered shared trace keeps 100%, a trace built with its ops numbered in two distant "
        "blocks a few percent (tests' ViT: 2.4%)",
        label="Inconclusive, in sequence or not, when a trace keeps fewer of its host ops (%)")
    min_kernels: int = limit(
        20, "a training or inference step launches hundreds of kernels; below 20 the shares "
        "hinge on a handful of launches (a test harness, a micro-benchmark)",
        label="Inconclusive with fewer kernels in the steps than")
    signals_disagree_pct: float = limit(
        30.0, "NVML counts a whole sample period busy, so it reads above the trace; more than "
        "30 points apart the two do not describe the same activity",
        label="Inconclusive when NVML and the trace disagree on busy time by (points)")
    min_nvml_samples: int = limit(5, "fewer NVML samples in the steps cannot contradict the trace",
                                  label="NVML samples needed in the steps to contradict the trace")

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class SignalThresholds:
    """The diagnoses from one signal alone: Nsight Compute rows, GPU counters
    (``diagnosis/classify.py``, ``ncu_only.py``, ``counters.py``)."""

    ncu_heavy_pct: float = limit(
        60.0, "a unit at 60% of its peak or more is the kernel's main limiter; below, the "
        "kernel is latency-limited", label="Nsight Compute: a unit is the limiter from (% of "
        "peak)", source="Nsight Compute speed-of-light guidance (60/80)")
    ncu_only_max_confidence: float = limit(
        0.5, "no timeline: the time between kernels is unknown",
        label="Confidence cap of an Nsight Compute export alone")
    counters_only_max_confidence: float = limit(
        0.5, "counters see averages, not what the GPU waits for",
        label="Confidence cap of GPU counters alone")
    pcie_bound_pct: float = limit(50.0, "the host link is at least half full on average",
                                  label="Counters: PCIe-bound from (% of the link)")
    idle_gpu_util_pct: float = limit(
        1.0, "every sample below 1% busy: the GPU ran nothing worth judging",
        label="Counters: an idle GPU below (% busy)")
    min_counter_samples: int = limit(2, "one reading of a counter is a moment, not a workload",
                                     label="Counters: samples needed for a verdict")
    not_running_memory_gib: float = limit(
        1.0, "under 1 GiB used and 0% busy, no job holds the GPU (a CUDA context alone "
        "takes about 0.5 GiB): the log's time before and after the job",
        label="Counters: not running below (GiB used, at 0% busy)")
    spin_power_fraction: float = limit(
        0.5, "at 90%+ utilization below half its busy power a GPU's kernels spin (NCCL waiting "
        "for a peer) rather than compute: utilization.gpu counts a waiting kernel as busy",
        label="Counters: spinning below (fraction of busy power)")
    busy_power_quantile: float = limit(
        0.9, "a GPU's busy power: this quantile of its power over its 90%+ busy samples",
        label="Counters: busy power quantile")
    stall_gpus_share: float = limit(
        0.5, "a stall: at least half of the GPUs spin at once (they wait for the same peer)",
        label="Counters: stall from (share of GPUs spinning)")


@dataclass(frozen=True, slots=True)
class AdviceThresholds:
    """The tuning rules' common floor (``diagnosis/advise.py``; each rule's own threshold is
    in its rule file, ``analyzers/data/recommendations.json``)."""

    min_impact_pct: float = limit(
        1.0, "a rule whose action addresses less of the step is not worth a line: pinning a "
        "28 MiB copy that is 0.6% of a 139 ms step", label="A rule is shown from (% of the step "
        "its action addresses)")


@dataclass(frozen=True, slots=True)
class SizingThresholds:
    """The advisor's judgement calls (``sizing/projection.py``)."""

    over_provisioned_savings_pct: float = limit(
        20.0, "a cheaper GPU must save at least this much per unit of work to call the current "
        "one over-provisioned: prices move by more than 10% between providers and months",
        label="Over-provisioned when a cheaper GPU saves (% per unit of work)")
    memory_pressure_fraction: float = limit(
        0.95, "peak allocated memory at or above this fraction of the device means the batch "
        "or model is being squeezed (smaller batches, offload): under-provisioned",
        label="Under-provisioned from peak memory of the device (fraction)")
    stall_fraction: float = limit(
        0.5, "data-loader + host + idle at or above half the step: the GPU is not what limits "
        "the job", label="The GPU does not limit the job from stalls of (fraction of the step)")
    achieved_flops_fraction: float = limit(
        0.40, "CPU-only runs moved to a GPU: dense transformer training reaches 40-50% of peak "
        "tensor FLOPS; we take 40%", label="CPU-only: achieved fraction of peak FLOPS",
        source="PaLM: 46.2% MFU (Chowdhery et al. 2022)")
    achieved_bandwidth_fraction: float = limit(
        0.80, "streaming kernels reach 80-90% of HBM peak bandwidth",
        label="CPU-only: achieved fraction of peak bandwidth", source="STREAM-style measurements")
    host_move_fraction: float = limit(
        0.225, "host, idle and data-loader time is set by the CPU, which moved 12.1-22.3% on "
        "the shared H100/MI300X trace pairs (Qwen 3.28 -> 4.01 ms per step): a projected range "
        "widens by this fraction of it on every GPU but the measured one",
        label="Host time's move between machines (fraction)")
    link_bound_fraction: float = limit(
        0.5, "copies at half the link or more were bound by it; below, by the host (an H100, "
        "PCIe gen 5 x16: pinned 54.0 GB/s, pageable 6.7 GB/s of 64)",
        label="Copies are link-bound from (fraction of the link)")
    link_achievable_fraction: float = limit(
        0.84, "pinned copies reach this fraction of a link's nominal rate (the H100 above)",
        label="Pinned copies' fraction of the link")


@dataclass(frozen=True, slots=True)
class StragglerThresholds:
    """Which rank of a job holds the others back (``job/stragglers.py``)."""

    tie_ns: int = limit(1_000, "Kineto wrote whole microseconds until 2023: closer arrivals "
                        "cannot be ordered", label="Arrivals closer than this tie (ns)")
    last_share_over_chance: float = limit(
        1.5, "last at 1.5x the fair share (1/n) of its calls: 75% of 2 ranks, 19% of 8, 1.2% "
        "of 128", label="A straggler is last at (x its 1/n share of the calls)")
    dominant_late_share: float = limit(
        0.5, "or, late at fewer calls (a data-loader stall delays only the step's first "
        "collective), the cause of at least half of all the job's lateness",
        label="Or causes of the job's lateness (fraction)")
    min_late_pct_of_step: float = limit(
        1.0, "the others' wait for it is at least 1% of the step; below, tuning it gains nothing",
        label="The others' wait worth a rule from (% of the step)")
    min_last_calls: int = limit(2, "one late call is an anecdote",
                                label="Calls it must be last at")
    min_explained: float = limit(
        0.5, "the cause is named only when the lead-in grew by at least half of the lateness",
        label="A cause is named when it explains (fraction of the lateness)")


@dataclass(frozen=True, slots=True)
class FleetMetricsThresholds:
    """``rightsize fleet metrics``' named numbers; the CLI may change ``headroom`` and
    ``min_window_s``, nothing else moves silently (docs/fleet-metrics.md)."""

    headroom: float = limit(
        0.20, "memory and compute both keep this headroom: the peak memory x (1 + headroom) must "
        "fit and the p95 activity stay under (1 - headroom) of the capacity (rightsize plan's "
        "default, so a slice chosen here is one plan would accept)", label="Headroom (fraction)")
    min_window_s: float = limit(6 * HOUR_S, "under 6 h a window cannot show a daily peak: no "
                                "recommendation", label="Shortest window (s)")
    day_window_s: float = limit(DAY_S, "a day sees one daily cycle (medium confidence at most "
                                "below it)", label="A window sees a day from (s)")
    week_window_s: float = limit(
        7 * DAY_S, "a week sees weekdays and weekends (krr's default history is 14 days; "
        "--since defaults to 7d)", label="A window sees a week from (s)", source="krr")
    min_coverage: float = limit(0.50, "fewer than half of the window's steps sampled: the gaps "
                                "could hide the peak", label="Least sampled share of the window")
    full_coverage: float = limit(0.90, "coverage at which gaps no longer lower the confidence",
                                 label="Coverage that costs no confidence")
    min_samples: int = limit(30, "fewer samples of memory or activity: percentiles are not "
                             "worth stating", label="Samples needed for percentiles")
    tie_share: float = limit(
        0.10, "options within this share of the cheapest tie, broken by least disruption "
        "(keep, fewer replicas, MIG, time share, smaller GPU): a 5% saving is not worth a move",
        label="Options tie within (fraction of the cheapest)")
    move_share: float = limit(
        0.25, "moving to another GPU type is a migration on a datasheet projection: it must cost "
        "this much less than the best option on the current GPU",
        label="Another GPU type must save (fraction)")
    percentile: float = limit(0.95, "the percentile activity is sized at; p99 is reported "
                              "beside it", label="Activity sized at (percentile)")
    idle_p99_pct: float = limit(
        1.0, "activity p99 under 1% over a whole window: nothing ran on the GPUs the workload "
        "holds, so the option is to release them, not a smaller GPU",
        label="Idle: activity p99 under (%)")

    @property
    def target_pct(self) -> float:
        """Busy share of a slice's (or GPU's) capacity allowed at the p95: 80% by default."""
        return 100.0 * (1.0 - self.headroom)


@dataclass(frozen=True, slots=True)
class ConfidenceBands:
    """A confidence (0..1) in words, for the fleet table's trace rows (``fleet/schema.py``)."""

    high_from: float = limit(
        0.7, "a verdict with no trace (counters or an ncu export alone, capped at 0.5) never "
        "reads high", label="High confidence from")
    medium_from: float = limit(
        0.4, "a verdict near the 60% busy line with a close runner-up (0.5 x 0.5 x ...) reads "
        "low", label="Medium confidence from")


DIAGNOSIS = DiagnosisThresholds()
SIGNALS = SignalThresholds()
ADVICE = AdviceThresholds()
SIZING = SizingThresholds()
STRAGGLERS = StragglerThresholds()
FLEET_METRICS = FleetMetricsThresholds()
CONFIDENCE = ConfidenceBands()
TABLE: tuple[Any, ...] = (DIAGNOSIS, SIGNALS, ADVICE, SIZING, STRAGGLERS, FLEET_METRICS,
                          CONFIDENCE)


def label(group: Any, name: str) -> str | None:
    """The label a report shows for a threshold of ``group`` (a class or an instance)."""
    for f in fields(group):
        if f.name == name:
            return str(f.metadata[LABEL]) or None
    return None


def markdown() -> str:
    """docs/thresholds.md: every group of :data:`TABLE` as a table of its thresholds."""
    out = ["# Thresholds", "",
           ("Every threshold rightsize decides with, its value, why, and where it comes from. "
            "Generated from `rightsize/analyzers/thresholds.py` (`python -m "
            "rightsize.analyzers.thresholds > docs/thresholds.md`); a test checks this page "
            "against it."), ""]
    for group in TABLE:
        cls = type(group)
        out += [f"## {cls.__name__}", "", " ".join((cls.__doc__ or "").split()), "",
                "| threshold | value | shown as | why | source |", "|---|---|---|---|---|"]
        for f in fields(group):
            out.append(f"| `{f.name}` | {getattr(group, f.name):g} | {f.metadata[LABEL]} | "
                       f"{f.metadata[WHY]} | {f.metadata[SOURCE] or 'rightsize'} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
