"""The text of ``rightsize serving simulate`` and ``rightsize serving plan``.

Input: a :class:`~rightsize.analyzers.serving.simulated.Simulated` or a
:class:`~rightsize.analyzers.serving.plan.ServingPlan`. Output: plain text (every value from
the data passed through :func:`~rightsize.reports.fmt.safe_text`). Pure.
"""

from __future__ import annotations

from rightsize.analyzers.serving.plan import Option, ServingPlan
from rightsize.analyzers.serving.simulated import Simulated, Times
from rightsize.reports.fmt import ms, ms_range, safe_text, usd


def render_table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _row(name: str, t: Times) -> tuple[str, ...]:
    def cell(v: float | None, lo: float | None, hi: float | None) -> str:
        return f"{ms(v)} ({ms_range(lo, hi)})"

    return (name, cell(t.mean, t.mean_low, t.mean_high), cell(t.p50, t.p50_low, t.p50_high),
            cell(t.p90, t.p90_low, t.p90_high), cell(t.p99, t.p99_low, t.p99_high))


def simulated_rows(s: Simulated) -> list[tuple[str, ...]]:
    """The latency table: a header row, then TTFT, TPOT, ITL and E2E."""
    return [("", "mean (range)", "p50 (range)", "p90 (range)", "p99 (range)"),
            _row("TTFT", s.ttft_ms), _row("TPOT", s.tpot_ms), _row("ITL", s.itl_ms),
            _row("E2E", s.e2e_ms)]


def simulated_text(s: Simulated) -> str:
    pp = f" PP {s.pp}" if s.pp > 1 else ""
    lines = [safe_text(f"{s.model} on {s.replicas} x {s.gpu} TP {s.tp}{pp} ({s.precision}), "
                       f"max_num_seqs {s.max_num_seqs}, max_num_batched_tokens "
                       f"{s.max_num_batched_tokens}"
                       + ("" if s.chunked_prefill else ", no chunked prefill")),
             safe_text(f"load: {s.load}; {s.requests} requests"), ""]
    lines.append(render_table(simulated_rows(s)))
    lines += ["", (f"throughput {s.throughput_rps:,.2f} req/s, {s.output_tokens_per_s:,.0f} "
              f"output tokens/s; KV cache peak {s.kv_cache_peak_pct:.1f}% of "
              f"{s.kv_cache_tokens:,} tokens; {s.preemptions} preemptions")]
    lines += _said(s.calibrated_by, s.assumes, s.notes)
    return "\n".join(lines) + "\n"


def _said(by: str, assumes: tuple[str, ...], notes: tuple[str, ...]) -> list[str]:
    out = ["", safe_text(f"calibrated by: {by}" if by else "uncalibrated: ranges are the "
                         "step model's validation error")]
    out += [safe_text(f"assumes: {a}") for a in assumes]
    out += [safe_text(f"note: {n}") for n in notes]
    return out


def _ranged(v: float, lo: float | None, hi: float | None) -> str:
    return f"{ms(v)} ({ms_range(lo, hi)})"


def option_row(o: Option) -> tuple[str, ...]:
    return (safe_text(o.gpu, True), str(o.tp), str(o.pp), str(o.replicas), str(o.max_num_seqs),
            str(o.max_num_batched_tokens), usd(o.cost_per_hour_usd), ms(o.ttft_p95_ms),
            ms(o.tpot_p95_ms), f"{o.tokens_per_s:,.0f}")


OPTION_HEAD = ("GPU", "TP", "PP", "replicas", "max_num_seqs", "max_batched", "$/hour",
               "TTFT p95", "TPOT p95", "tokens/s")


def plan_text(p: ServingPlan) -> str:
    r = p.recommended
    assert r is not None
    head = safe_text(f"{p.model} at {p.rate_per_s:g} req/s ({p.load}), SLO TTFT p95 <= "
                     f"{p.ttft_p95_slo_ms:g} ms, TPOT p95 <= {p.tpot_p95_slo_ms:g} ms")
    rec = safe_text(f"recommended: {r.label}: {usd(r.cost_per_hour_usd)}/hour ({r.gpus} GPUs,"
                    f" {r.price})")
    ttft = _ranged(r.ttft_p95_ms, r.ttft_p95_ms_low, r.ttft_p95_ms_high)
    tpot = _ranged(r.tpot_p95_ms, r.tpot_p95_ms_low, r.tpot_p95_ms_high)
    lines = [head, "", rec,
             (f"  TTFT p95 {ttft}, TPOT p95 {tpot}, {r.tokens_per_s:,.0f} output tokens/s, "
             f"KV cache peak {r.kv_cache_peak_pct:.0f}%"),
             "  vllm serve MODEL " + " ".join(p.vllm_args), "", "frontier (simulated):",
             render_table([OPTION_HEAD, *(option_row(o) for o in p.frontier)])]
    if p.mixed is not None:
        m = p.mixed
        lines += ["", safe_text(
            f"mixed: requests up to {m.threshold_tokens} tokens ({m.short_share_pct:.0f}%) on "
            f"{m.short.label}, longer ones on {m.long.label}: {usd(m.cost_per_hour_usd)}/hour"
            f", {m.saving_pct:.0f}% less")]
    elif p.mixed_note:
        lines += ["", safe_text(p.mixed_note)]
    if p.rejected:
        lines += ["", "rejected:"] + [safe_text(f"  {x.config}: {x.why}") for x in p.rejected]
    lines += ["", (f"searched {p.evaluated:,} configurations with the fast path, simulated "
              f"{p.simulated}")]
    lines += _said(p.calibrated_by, p.assumes, p.notes)
    return "\n".join(lines) + "\n"
