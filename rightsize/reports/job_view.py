"""The report's job section: the ranks of one job, its stragglers and its collectives.

Input: the document's :class:`~rightsize.analyzers.document.job.Job`. Output: a
:class:`JobView` of formatted cells that the text and HTML renderers both draw (the text one
with :func:`text_lines`, the page with ``templates/job.html.j2``): the job's facts, stragglers,
collectives per type, each collective type and size against NCCL's model on the job's fabric
(``job.collective_checks``: measured against expected, NCCL's pick, slow ones with their
likely cause) and the ranks. Nothing is computed here beyond formatting: every number is the
document's.
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.analyzers.document.job import Job
from rightsize.reports import fmt

RANKS_SHOWN = 64  # ranks listed in the table (the JSON has all)
CHECKS_TITLE = "Collectives against NCCL's model on this fabric"
# The columns the terminal shows (of the tables below; the page shows all): 80 columns wide.
TEXT_RANK_COLUMNS = (0, 1, 4, 8, 9, 10)
TEXT_COLLECTIVE_COLUMNS = (0, 1, 4, 5, 6, 9)
TEXT_CHECK_COLUMNS = (0, 1, 4, 5, 8, 9)
_TYPE_LABEL = {"allreduce": "all-reduce", "allgather": "all-gather",
               "reducescatter": "reduce-scatter", "alltoall": "all-to-all",
               "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send/recv"}


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    more: int = 0  # rows left out


@dataclass(frozen=True, slots=True)
class JobView:
    facts: tuple[tuple[str, str], ...]  # label, value
    stragglers: tuple[str, ...]  # one sentence each, the largest impact first
    ranks: Table
    collectives: Table
    notes: tuple[str, ...]
    checks: Table = Table((), ())  # each collective type and size against the model


def job_view(job: Job | None) -> JobView | None:
    if job is None:
        return None
    return JobView(facts=_facts(job), stragglers=tuple(_straggler(s) for s in job.stragglers),
                   ranks=_ranks(job), collectives=_collectives(job), notes=job.notes,
                   checks=_checks(job))


def _facts(job: Job) -> tuple[tuple[str, str], ...]:
    ranks = f"{job.rank_count}" + (f" of {job.world_size}" if job.world_size != job.rank_count
                                   else "") + (f" ({job.backend})" if job.backend else "")
    nodes = "unknown" if job.nodes is None else \
        f"{job.nodes} x {job.gpus_per_node} GPUs" if job.gpus_per_node else str(job.nodes)
    out = [("Ranks", ranks), ("Nodes", f"{nodes} ({job.nodes_basis})"),
           ("GPU", job.device or "unknown"), ("Fabric", job.fabric),
           ("Step", (f"{fmt.ms(job.step_ms_mean)} mean over ranks, "
                    f"{fmt.ms(job.step_ms_spread)} between the fastest and slowest rank"))]
    if job.communication_ms_per_step is not None:
        out.append(("Collectives", (f"{fmt.ms(job.communication_ms_per_step)} per step per rank: "
                                   f"{fmt.ms(job.wait_ms_per_step)} waiting for the last rank, "
                                   f"{fmt.ms(job.exposed_ms_per_step)} not overlapped by "
                                   f"compute ({fmt.pct(job.overlap_pct)} overlapped); "
                                   f"{job.calls_total} calls matched by "
                                   f"{', '.join(job.matched_by) or 'nothing'}")))
    if job.cost is not None:
        c = job.cost
        out.append(("Job cost", (f"{c.gpus} x {c.gpu} at {fmt.usd(c.usd_per_gpu_hour)}/GPU-hour"
                                f" = {fmt.usd(c.usd_per_hour)}/hour, "
                                f"{fmt.usd_per_steps(c.usd_per_1k_steps)}")))
    return tuple(out)


def _straggler(s: object) -> str:
    text = str(getattr(s, "text", ""))
    return text[:1].upper() + text[1:]


def _ranks(job: Job) -> Table:
    rows = []
    for r in job.ranks[:RANKS_SHOWN]:
        shares = r.shares_ms
        rows.append((
            "n/a" if r.rank is None else str(r.rank), r.node or "unknown",
            "n/a" if r.device is None else str(r.device), str(r.steps),
            fmt.ms(r.step_ms_mean, 3), fmt.ms(shares.get("compute"), 3),
            fmt.ms(shares.get("dataloader"), 3), fmt.ms(shares.get("host"), 3),
            fmt.ms(r.wait_ms_per_step, 3), fmt.ms(r.exposed_ms_per_step, 3),
            str(r.last_calls)))
    return Table(("Rank", "Node", "GPU", "Steps", "Step (mean)", "Compute", "Data loader", "Host",
                  "Waiting", "Exposed comm.", "Last at"),
                 tuple(rows), max(0, len(job.ranks) - RANKS_SHOWN))


def _collectives(job: Job) -> Table:
    rows = []
    for c in job.collectives:
        peak = "n/a" if c.link_peak_gbs is None else \
            f"{fmt.num(c.link_peak_gbs, 0)} ({fmt.pct(c.busbw_pct_of_peak)})"
        rows.append((
            _TYPE_LABEL.get(c.collective, c.collective), str(c.calls),
            "n/a" if c.group_size is None else str(c.group_size),
            fmt.nbytes(round(c.bytes_per_call)) if c.bytes_per_call is not None else "n/a",
            fmt.ms(c.time_ms_per_step, 3), fmt.ms(c.wait_ms_per_step, 3),
            fmt.ms(c.transfer_ms_per_step, 3), fmt.ms(c.exposed_ms_per_step, 3),
            fmt.num(c.algbw_gbs, 2), fmt.num(c.busbw_gbs, 2), peak))
    return Table(("Collective", "Calls", "Ranks", "Size per call", "Time/step", "Waiting",
                  "Transfer", "Exposed", "algbw GB/s", "busbw GB/s", "Link peak GB/s (busbw %)"),
                 tuple(rows))


def _checks(job: Job) -> Table:
    """``job.collective_checks``: slow ones first (their verdict says how slow and why)."""
    rows = []
    for c in sorted(job.collective_checks, key=lambda c: (c.verdict != "slow", -c.slowdown)):
        verdict = ("as expected" if c.verdict == "expected" else
                   f"{fmt.num(c.slowdown, 1)}x slower: {c.cause}")
        rows.append((
            _TYPE_LABEL.get(c.collective, c.collective), fmt.nbytes(c.bytes), str(c.group_size),
            str(c.calls), fmt.num(c.transfer_us, 1), fmt.num(c.expected_us, 1),
            fmt.num(c.busbw_gbs, 2), fmt.num(c.expected_busbw_gbs, 2),
            f"{c.algorithm} {c.protocol}", verdict))
    return Table(("Collective", "Size per call", "Ranks", "Calls", "Measured µs", "Expected µs",
                  "busbw GB/s", "Expected busbw GB/s", "NCCL's pick", "Verdict"), tuple(rows))


def text_lines(view: JobView | None) -> list[str]:
    """The job section as text lines (the caller wraps and styles them)."""
    if view is None:
        return []
    lines = ["Job across ranks"]
    lines += [f"  {label}: {value}" for label, value in view.facts]
    lines += [f"  - {s}" for s in view.stragglers] or [("  - no straggler: no rank arrives last "
                                                       "at the collectives more than chance")]
    for title, table, cols in (("Collectives", view.collectives, TEXT_COLLECTIVE_COLUMNS),
                               (CHECKS_TITLE, view.checks, TEXT_CHECK_COLUMNS),
                               ("Ranks", view.ranks, TEXT_RANK_COLUMNS)):
        if not table.rows:
            continue
        lines.append(f"  {title}")
        heads = [table.headers[i] for i in cols]
        rows = [[r[i] for i in cols] for r in table.rows]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
        lines.append("    " + "  ".join(h.ljust(w) for h, w in zip(heads, widths,
                                                                    strict=True)).rstrip())
        lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
        if table.more:
            lines.append(f"    ... {table.more} more in the JSON document (key job.ranks)")
    lines += [f"  note: {n}" for n in view.notes]
    return lines
