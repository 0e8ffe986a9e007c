"""A distributed job's communication on one sizing candidate: the layout it is projected on,
the calls projected by NCCL's cost model (``comm``), the words and caveats that say so, and
the check of a user-given layout. Used by ``projection``; pure.
"""

from __future__ import annotations

from rightsize.analyzers.job.fabric import fabric_of
from rightsize.analyzers.sizing.comm import CommProjection, Layout, layout_for, project_calls
from rightsize.analyzers.sizing.model import Constraints, SizingError, Workload
from rightsize.analyzers.sizing.placement import nvlink_group
from rightsize.catalog import Gpu, Price
from rightsize.vocab import Share

NOT_LIKE = "not like-for-like"


# A candidate whose projected communication leaves more than this share of the measured
# collective kernel time unmodelled (calls without a recorded size) is not like-for-like.
MAX_HELD_COMM_FRACTION = 0.5


def job_comm(workload: Workload, constraints: Constraints, current: Gpu | None, gpu: Gpu,
             gpus: int, price: Price | None) -> tuple[CommProjection | None, Layout | None]:
    """A job's communication on ``gpu`` (its calls projected by the model) and the layout it is
    projected on; (None, layout) where it is held as measured (the measured GPU and layout) or
    cannot be projected; (None, None) for a single-rank run or several GPUs per rank."""
    given = constraints.layout_gpus is not None or constraints.layout_gpus_per_node is not None
    if current is None or (workload.ranks <= 1 and not given) or gpus != 1 or workload.gpus != 1:
        return None, None
    measured = layout_for(current, workload.ranks)
    target = layout_for(gpu, constraints.layout_gpus or workload.ranks,
                        constraints.layout_gpus_per_node, price)
    same = gpu is current and (target.ranks, target.per_node) == (measured.ranks,
                                                                  measured.per_node)
    if same or not workload.collectives:
        return None, target
    return project_calls(workload.collectives, measured, target, constraints.comm_model), target


def comm_words(comm: CommProjection, layout: Layout, measured_ms: float) -> str:
    wait = (f"; waiting for late ranks held at {comm.wait_ms:.2f} ms"
            + (" (the measured kernel time beyond the model's transfer on the measured fabric:"
               " one rank's trace does not record the wait)" if comm.wait_estimated else "")
            if comm.wait_ms else "")
    held = (f"; {comm.held_ms:.2f} ms of calls without a recorded size held as measured"
            if comm.held_ms else "")
    return (f"communication projected with NCCL's cost model (sizing/comm.py) on"
            f" {layout.words}: transfers {comm.transfer_ms:.3f} ms per step, within"
            f" x/÷{1 + comm.error_pct / 100:.2f} (the fabric class's leave-one-system-out"
            f" error){wait}{held}; measured exposed communication {measured_ms:.2f} ms")


def _fabric(gpu: Gpu, ranks: int) -> tuple[str, int | None, bool]:
    """What joins ``ranks`` of ``gpu``: within one node or across nodes (16 A100s need two),
    and whether a GPU link joins a node's GPUs (bridged PCIe cards join only 2 or 4)."""
    f = fabric_of(gpu, ranks)
    return f.kind, f.nodes, nvlink_group(gpu) > 1



def comm_caveats(workload: Workload, constraints: Constraints, current: Gpu | None, gpu: Gpu,
                 gpus: int, comm: CommProjection | None = None,
                 layout: Layout | None = None) -> tuple[list[str], bool]:
    """A candidate's warnings about its layout and communication, and whether it may be
    recommended as far as they go."""
    warnings: list[str] = []
    ok = True
    measured_ms = workload.shares_ms.get(str(Share.COMMUNICATION), 0.0)
    measured_gpus = max(workload.ranks, workload.gpus)
    per_node = constraints.layout_gpus_per_node
    size = gpu.gpus_per_node or (layout.system.gpus_per_node if layout else None)
    if per_node is not None and size is not None and per_node > size:
        warnings.append(f"not a layout of the {gpu.name}: one of its nodes holds {size} GPUs,"
                        f" not {per_node}")
        ok = False
    if comm is not None and layout is not None:
        warnings.append(comm_words(comm, layout, measured_ms))
        if comm.held_ms > MAX_HELD_COMM_FRACTION * comm.measured_kernel_ms:
            warnings.append(f"{NOT_LIKE}: most of the measured collective time"
                            f" ({comm.held_ms:.2f} of {comm.measured_kernel_ms:.2f} ms per"
                            " step) has no recorded message size, so the model cannot"
                            " project it")
            ok = False
        return warnings, ok
    moved = current is not None and layout is not None and (
        layout.ranks, layout.per_node) != (measured_gpus,
                                           layout_for(current, measured_gpus).per_node)
    if measured_ms > 0 and current is not None and (
            moved or gpus * (workload.ranks if workload.gpus == 1 else 1) != measured_gpus
            or _fabric(gpu, measured_gpus) != _fabric(current, measured_gpus)):
        warnings.append(f"{NOT_LIKE}: the measured job ran {measured_gpus} ranks over"
                        f" {fabric_of(current, measured_gpus).words}; communication"
                        f" ({measured_ms:.1f} ms per step) is held as measured, which this"
                        " candidate does not keep")
        ok = False
    return warnings, ok


def validate_layout(gpus: int | None, per_node: int | None, ranks: int) -> None:
    """Refuse a layout no machine has, and one for a run whose communication is unknown."""
    if gpus is None and per_node is None:
        return
    if ranks <= 1:
        raise SizingError("--gpus/--gpus-per-node lay out a distributed job, and this trace is "
                          "one rank: its communication at another rank count is unknown")
    n = gpus or ranks
    if n < 2 or (per_node is not None and per_node < 1):
        raise SizingError(f"a layout of {n} GPUs, {per_node} per node, has no collectives")
    if per_node is not None and per_node > n:
        raise SizingError(f"--gpus-per-node {per_node} is more than the {n} GPUs in all")
    if per_node is not None and n % per_node:
        raise SizingError(f"{n} GPUs do not fill nodes of {per_node} (--gpus must be a multiple"
                          " of --gpus-per-node)")
