"""The text rendering of ``rightsize serving predict``: one row per point (in the order given),
each time with its range, then what calibrated the model and what it assumed, said once.

Input: :class:`~rightsize.analyzers.serving.predict.Prediction` rows. Output: plain text.
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from rightsize.analyzers.serving.predict import Prediction
from rightsize.reports.fmt import ms, ms_range, nbytes, safe_text

HEAD = ("GPU", "TP", "PP", "batch", "isl", "osl", "TTFT (range)", "TPOT (range)",
        "memory/GPU", "fits")


def _time(v: float, lo: float, hi: float) -> str:
    return f"{ms(v)} ({ms_range(lo, hi)})"


def predictions_text(rows: Sequence[Prediction]) -> str:
    """A table of the predictions, then the calibration and the assumptions."""
    table = [HEAD]
    for r in rows:
        p = r.point
        table.append((safe_text(p.gpu, True), str(p.tp), str(p.pp), str(p.batch), str(p.isl),
                      str(p.osl), _time(r.ttft_ms, r.ttft_ms_low, r.ttft_ms_high),
                      _time(r.tpot_ms, r.tpot_ms_low, r.tpot_ms_high),
                      nbytes(r.memory_per_gpu_bytes),
                      "yes" if r.fits else "no"))
    widths = [max(len(row[i]) for row in table) for i in range(len(HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines += ["", ("TTFT: one prefill of the whole batch's prompts; TPOT: one decode step of"
                   " the batch at the mean KV length (isl + osl/2), static batching.")]
    by = sorted({r.calibrated_by for r in rows if r.calibrated_by})
    lines.append("calibrated by: " + ("; ".join(safe_text(b, True) for b in by) if by else
                                      "nothing (uncalibrated: pass --measured to calibrate)"))
    seen: list[str] = []
    for r in rows:
        seen += [a for a in r.assumes if a not in seen]
    lines += ["assumes:", *(f"  - {safe_text(a, True)}" for a in seen)]
    return "\n".join(lines) + "\n"
