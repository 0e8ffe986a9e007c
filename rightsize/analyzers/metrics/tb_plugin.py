"""Step-time breakdown and GPU metrics as the PyTorch Profiler TensorBoard plugin defines them.

Definitions (torch-tb-profiler 0.4.3; docs/metrics.md quotes the source lines):

* **Step-time breakdown**: each role is the union of its intervals; roles are charged in the
  priority order Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec,
  each only where no higher role already ran, and Other is the rest of the step. Per step the
  parts sum to the step; the reported figure is the mean over steps.
* **GPU utilization** (per device): |union of kernel intervals ∩ W| / |W|, where W runs from
  the first step's start to the last step's end.
* **Est. SM efficiency** (per device): Σ over elementary time segments of
  min(1, Σ blocks-per-SM of the kernels running) × segment length, over |W|.
* **Est. achieved occupancy** (per device): kernel-duration-weighted mean of Kineto's
  ``est. achieved occupancy %`` over the kernels' parts inside W.

Where rightsize differs from the plugin (defects, see ``BreakdownOptions``): runtime calls are
recognised by their current category names too; a kernel is communication when its name says so
(``nccl*``/``rccl*``) or it was launched by a collective op, not only when launched by one of five
exactly-named ops; any ``nccl:``/``gloo:`` host op counts as communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.analyzers.document.metrics import BreakdownMs, DeviceMetrics
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.traces.schema import Trace

ROLES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
# The plugin's exact collective op names (NcclOpNameSet / GlooOpNameSet).
PLUGIN_COMM_OPS = frozenset(
    f"{lib}:{op}" for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)
COMM_KERNEL = r"(?i)^(nccl|rccl)"  # NCCL/RCCL kernels: ncclKernel_*, ncclDevKernel_*
COMM_OP = r"^(nccl|gloo|mpi|ucc):"  # host-side collective ops as record_function names them
DATALOADER = r"^(enumerate\(DataLoader\)#.*\.__next__|enumerate\(DataPipe\)#.*)$"


@dataclass(frozen=True, slots=True)
class BreakdownOptions:
    """Switches that reproduce the plugin's defects (for comparison with its numbers only)."""

    legacy_runtime_only: bool = False  # only 2021 "Runtime" events are runtime
    plugin_comm_rules: bool = False  # comm = 5 exact op names and the kernels they launched


def _span(df: pl.DataFrame) -> iv.Intervals:
    return iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy())


def role_frames(trace: Trace, options: BreakdownOptions) -> dict[str, pl.DataFrame]:
    """The events behind each role (before priority subtraction)."""
    # Filters copy every column they keep: only the ones read here go in.
    ops = trace.cpu_ops.select("ts_ns", "dur_ns", "name", "cat", "external_id")
    if options.plugin_comm_rules:
        comm_ops = ops.filter(pl.col("name").is_in(list(PLUGIN_COMM_OPS)))
        comm_ids = comm_ops["external_id"].drop_nulls().implode()
        is_comm_kernel = pl.col("external_id").is_in(comm_ids)
        comm_host = comm_ops.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"]))
    else:
        comm_ops = ops.filter(pl.col("name").str.contains(COMM_OP))
        comm_ids = comm_ops["external_id"].drop_nulls().implode()
        is_comm_kernel = pl.col("name").str.contains(COMM_KERNEL) | pl.col("external_id").is_in(
            comm_ids
        )
        comm_host = comm_ops.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"]))
    is_comm_kernel = is_comm_kernel.fill_null(False)
    kernels = trace.kernels.select("ts_ns", "dur_ns", "name", "external_id")
    runtime = trace.runtime
    if options.legacy_runtime_only and not trace.meta.legacy_names:
        runtime = runtime.clear()
    is_dl = pl.col("name").str.contains(DATALOADER)
    host = ops.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"]))
    dataloader = host.filter(is_dl)
    cpu_exec = ops.filter(
        (pl.col("cat") == "cpu_op") & ~is_dl & ~pl.col("name").is_in(comm_host["name"].implode())
    )
    cols = ["ts_ns", "dur_ns"]
    return {
        "kernel": kernels.filter(~is_comm_kernel).select(cols),
        "memcpy": trace.transfers.filter(pl.col("kind") == "memcpy").select(cols),
        "memset": trace.transfers.filter(pl.col("kind") == "memset").select(cols),
        "communication": pl.concat(
            [kernels.filter(is_comm_kernel).select(cols), comm_host.select(cols)]
        ),
        "runtime": runtime.select(cols),
        "dataloader": dataloader.select(cols),
        "cpu_exec": cpu_exec.select(cols),
    }


def exclusive_roles(
    frames: dict[str, pl.DataFrame], steps: Steps
) -> dict[str, iv.Intervals]:
    """Priority-subtracted role intervals inside the union of the steps (plus ``other``)."""
    slots = iv.union(iv.of(steps.start_ns, steps.end_ns))
    out: dict[str, iv.Intervals] = {}
    for role in ROLES:
        mine = iv.intersect(slots, iv.union(_span(frames[role])))
        out[role] = mine
        slots = iv.subtract(slots, mine)
    out["other"] = slots
    return out


def breakdown(trace: Trace, steps: Steps,
              options: BreakdownOptions = BreakdownOptions()) -> BreakdownMs:
    """The plugin's step-time breakdown, averaged over ``steps``."""
    roles = exclusive_roles(role_frames(trace, options), steps)
    per_step = {
        role: tuple(int(v) for v in iv.per_window(r, steps.start_ns, steps.end_ns))
        for role, r in roles.items()
    }
    n = max(steps.count, 1)
    mean = {role: sum(v) / n for role, v in per_step.items()}
    step_ns = float(steps.dur_ns.sum()) / n if steps.count else 0.0
    return BreakdownMs(
        kernel=mean["kernel"] / 1e6, memcpy=mean["memcpy"] / 1e6, memset=mean["memset"] / 1e6,
        communication=mean["communication"] / 1e6, runtime=mean["runtime"] / 1e6,
        dataloader=mean["dataloader"] / 1e6, cpu_exec=mean["cpu_exec"] / 1e6,
        other=mean["other"] / 1e6, step=step_ns / 1e6, per_step_ns=per_step,
    )


def device_metrics(trace: Trace, steps: Steps) -> list[DeviceMetrics]:
    """GPU utilization, Est. SM efficiency and Est. achieved occupancy per device."""
    if steps.count == 0 or trace.kernels.height == 0:
        return []
    w0 = int(steps.start_ns[0])
    w1 = int(steps.end_ns[-1])
    window = w1 - w0
    out = []
    kernels = trace.kernels.filter(pl.col("device").is_not_null())
    for device in sorted(kernels["device"].unique().to_list()):
        k = kernels.filter(pl.col("device") == device)
        busy = iv.clip(iv.union(_span(k)), w0, w1)
        util = 100.0 * iv.total(busy) / window if window > 0 else None
        kernel_ns = int(k["dur_ns"].sum())
        out.append(DeviceMetrics(
            gpu_util_pct=util,
            sm_efficiency_pct=_sm_efficiency(k, w0, w1),
            achieved_occupancy_pct=_occupancy(k, w0, w1),
            kernel_ms=kernel_ns / 1e6,
            device=int(device),
            kernel_ns=kernel_ns,
        ))
    return out


def _sm_efficiency(k: pl.DataFrame, w0: int, w1: int) -> float | None:
    # the columns read, selected before the filter (a filter copies every column it keeps)
    k = k.select("ts_ns", "dur_ns", "blocks_per_sm").filter(pl.col("blocks_per_sm") > 0)
    if k.height == 0 or w1 <= w0:
        return None
    seg_s, seg_e, val = iv.capped_sum_segments(
        *iv.from_durations(k["ts_ns"].to_numpy(), k["dur_ns"].to_numpy()),
        k["blocks_per_sm"].to_numpy(),
    )
    cs = np.maximum(seg_s, w0)
    ce = np.minimum(seg_e, w1)
    inside = ce > cs
    if not inside.any():
        return None
    return 100.0 * float((val[inside] * (ce[inside] - cs[inside])).sum()) / (w1 - w0)


def _occupancy(k: pl.DataFrame, w0: int, w1: int) -> float | None:
    k = k.select("ts_ns", "dur_ns", "occupancy_pct").filter(pl.col("occupancy_pct") >= 0)
    if k.height == 0:
        return None
    s, e = iv.from_durations(k["ts_ns"].to_numpy(), k["dur_ns"].to_numpy())
    dur = np.minimum(e, w1) - np.maximum(s, w0)
    inside = dur > 0
    total = float(dur[inside].sum())
    if total <= 0:
        return None
    return float((k["occupancy_pct"].to_numpy()[inside] * dur[inside]).sum()) / total
