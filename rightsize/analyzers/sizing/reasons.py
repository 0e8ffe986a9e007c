"""The words of a sizing's reason: how much faster or slower, what a stalled step needs, what a
candidate had to meet. Pure; used by ``projection``.
"""

from __future__ import annotations

from collections.abc import Mapping

from rightsize.analyzers.document.sizing import Candidate, Objective
from rightsize.analyzers.sizing.model import Constraints
from rightsize.catalog import Gpu
from rightsize.vocab import Share


def speed_words(best: Candidate, cur: Candidate) -> tuple[str, str]:
    """("3.1x slower", "12.0 ms projected, range 10.1-13.9, vs 3.9 ms now"): speed first."""
    b, c = best.projected_step_ms or 0.0, cur.projected_step_ms or 0.0
    ratio = b / c if c else 1.0
    speed = (f"{ratio:.1f}x slower" if ratio >= 1.05 else
             f"{1 / ratio:.1f}x faster" if 0 < ratio <= 1 / 1.05 else "as fast")
    span = (f", range {best.projected_step_ms_low:.1f}-{best.projected_step_ms_high:.1f}"
            if best.projected_step_ms_low is not None
            and best.projected_step_ms_high is not None else "")
    return speed, f"{b:.1f} ms projected{span}, vs {c:.1f} ms now"


def slower_words(name: str, slower: Candidate, cur: Candidate) -> str:
    """What a cheaper GPU the objective passed over costs in time. Passed over because its
    range reaches beyond --slower-ok: where its point projection is as fast as now, the slower
    part is the top of its range, and that is what is said (never "as fast")."""
    speed, _ = speed_words(slower, cur)
    p, c = slower.projected_step_ms or 0.0, cur.projected_step_ms or 0.0
    high = slower.projected_step_ms_high or p
    if speed.endswith("slower") or not c or high <= c:
        return f"{name} is {speed} ({p:.1f} ms projected, up to {high:.1f})"
    return (f"{name} may be up to {high / c - 1:.0%} slower ({p:.1f} ms projected, up to"
            f" {high:.1f}, vs {c:.1f} ms now)")


def stall_words(shares: Mapping[str, float], step_ms: float, cpu_work_ms: float = 0.0,
                named_ms: float = 0.0, named: str = "", remedies: bool = True) -> str:
    """What the stalled part of a step needs, which a bigger GPU does not give; ``cpu_work_ms``:
    the job's own CPU work within the host share (``diagnosis.host_work``); ``named``: what
    the diagnosis names of the wait (``named_ms`` of it), said when it is most of it.
    ``remedies`` False (an inconclusive diagnosis: the step may not be the job's): what was
    measured, without the fix (a cold start was told "use CUDA graphs", a near-empty capture
    "a smaller GPU": advice its evidence does not earn)."""
    loader = shares.get(str(Share.DATALOADER), 0.0)
    host = shares.get(str(Share.HOST), 0.0) + shares.get(str(Share.IDLE), 0.0)
    if named and named_ms >= (loader + host) / 2:
        return f"{named_ms / step_ms:.0%} of each step the GPU waits {named}"
    said, fix = _stall(shares, step_ms, loader, host, cpu_work_ms)
    return f"{said}: {fix}" if remedies else said


def _stall(shares: Mapping[str, float], step_ms: float, loader: float, host: float,
           cpu_work_ms: float) -> tuple[str, str]:
    """The stall in words and its fix (:func:`stall_words`)."""
    wont = ", which a bigger GPU will not shrink"
    if loader >= host:
        fix = ("raise DataLoader num_workers, set pin_memory=True and persistent_workers=True,"
               " pre-process or cache the dataset")
        return f"{loader / step_ms:.0%} of each step waits for the data loader{wont}", fix
    idle = shares.get(str(Share.IDLE), 0.0)
    if cpu_work_ms >= (host - cpu_work_ms):
        gpu = sum(shares.get(str(s), 0.0) for s in (Share.COMPUTE, Share.MEMORY,
                                                    Share.COMMUNICATION, Share.PCIE))
        said = (f"{cpu_work_ms / step_ms:.0%} of each step is the job's own CPU work (decoding,"
                f" preprocessing, ops on CPU tensors) in series with the GPU{wont}")
        return said, ("move it into DataLoader workers or onto the GPU; a faster GPU shrinks"
                      f" only the GPU's {gpu / step_ms:.0%}")
    if idle > host - idle:
        # Seen on an H100: an inference loop sleeping 5 ms between requests, 93% of its steps
        # with nothing recorded; launch-overhead advice would not touch that.
        said = (f"{host / step_ms:.0%} of each step the GPU waits, {idle / step_ms:.0%} with"
                " nothing recorded on the host (the job waiting - asleep, for input or"
                f" requests, in I/O - or host work the trace did not record){wont}")
        return said, ("give the GPU more work per step (larger batches, batched requests) or"
                      " a smaller GPU")
    said = f"{host / step_ms:.0%} of each step is host/launch overhead (the GPU waits for the CPU)"
    return said + wont, ("use larger batches, CUDA graphs or"
                         " torch.compile(mode='reduce-overhead'), and avoid"
                         " .item()/synchronize in the loop")


def goal(constraints: Constraints) -> str:
    """What a candidate had to meet, in words."""
    if constraints.objective == Objective.COST:
        return "the constraints"
    return (f"the constraints within {constraints.slower_ok_pct:g}% of its step time"
            " (--slower-ok)")


def memory_unknown(current: Gpu, passed_over: Candidate | None, nothing_left: bool = False) -> str:
    """Why GPUs with less memory than ``current`` were not considered, and the pick that rule
    cost (``passed_over``: the cheapest candidate meeting everything else); ``nothing_left``:
    no GPU that was considered could be recommended."""
    words = (f"peak memory is unknown, so only GPUs with at least the {current.name}'s"
             f" {current.memory_gib:.0f} GiB were considered")
    if nothing_left:
        words += " and none of them is priced and meets the constraints"
    if passed_over is not None:
        words += (f"; {passed_over.gpu} ({passed_over.projected_step_ms:.1f} ms projected) meets"
                  " them and would be compared if the job fits it")
    return words + "; record the peak with profile_memory=True (rightsize run does)"
