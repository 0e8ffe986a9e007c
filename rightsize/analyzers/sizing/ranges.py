"""The ranges a projected candidate carries: its GPU part's and its whole step's.

Inputs: the projected step, its GPU-bound part (kernels and copies, scaled onto the candidate),
its communication with the model's range, the CPU-set time (host, idle, data loader) and the
validation error that applies between the two GPUs (``rates.RatesTable.error_for``). Output:
:class:`Ranges`. The GPU part (``projected_gpu_ms``: the bound part plus communication) is
projected ± the validation error of the bound part and the communication model's range; the step
range adds the CPU-set time's move between machines (``SizingThresholds.host_move_fraction``).
On the measured GPU at the measured layout nothing is projected: every range is the point. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ranges:
    step_low_ms: float | None
    step_high_ms: float | None
    gpu_ms: float | None  # the projected GPU part: kernels, copies and communication
    gpu_low_ms: float | None
    gpu_high_ms: float | None
    objective_high_ms: float | None  # the step's top without the host's move (the objective's)


def ranges(step_ms: float | None, bound_ms: float | None, comm_ms: float, comm_low_ms: float,
           comm_high_ms: float, host_ms: float, error_pct: float, host_move: float,
           projected: bool, comm_projected: bool) -> Ranges:
    """``projected``: another GPU than the measured one (else the bound part is as measured);
    ``comm_projected``: the communication was projected by the model (its range applies)."""
    if step_ms is None or bound_ms is None:
        return Ranges(step_ms, step_ms, None, None, None, step_ms)
    spread = bound_ms * error_pct / 100 if projected else 0.0
    lo_c, hi_c = (comm_low_ms, comm_high_ms) if comm_projected else (0.0, 0.0)
    gpu = bound_ms + comm_ms
    host = host_ms * host_move if projected else 0.0  # another machine's CPU
    return Ranges(step_ms - spread - lo_c - host, step_ms + spread + hi_c + host, gpu,
                  gpu - spread - lo_c, gpu + spread + hi_c, step_ms + spread + hi_c)
