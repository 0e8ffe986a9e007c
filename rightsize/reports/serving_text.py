"""``rightsize serving predict`` through the renderer protocol (:mod:`rightsize.reports.renderer`):
one row per point (in the order given), each time with its range, then what calibrated the
model and what it assumed, said once; as text, as the JSON contract (``{"predictions":
[...]}``, docs/json-contract.md) or as one self-contained page.

Input: :class:`~rightsize.analyzers.serving.predict.Prediction` rows. Output: text, JSON types
or HTML (autoescape on, no script). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rightsize import __version__
from rightsize.analyzers.serving.predict import Prediction
from rightsize.reports.fmt import ms, ms_range, nbytes, safe_text
from rightsize.reports.renderer import Style

HEAD = ("GPU", "TP", "PP", "batch", "isl", "osl", "TTFT (range)", "TPOT (range)",
        "memory/GPU", "fits")
DEFINITIONS = ("TTFT: one prefill of the whole batch's prompts; TPOT: one decode step of the "
               "batch at the mean KV length (isl + osl/2), static batching.")
UNCALIBRATED = "nothing (uncalibrated: pass --measured to calibrate)"


def _time(v: float, lo: float, hi: float) -> str:
    return f"{ms(v)} ({ms_range(lo, hi)})"


def prediction_rows(rows: Sequence[Prediction]) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per point (values from the input made safe to print)."""
    out: list[tuple[str, ...]] = []
    for r in rows:
        p = r.point
        out.append((safe_text(p.gpu, True), str(p.tp), str(p.pp), str(p.batch), str(p.isl),
                    str(p.osl), _time(r.ttft_ms, r.ttft_ms_low, r.ttft_ms_high),
                    _time(r.tpot_ms, r.tpot_ms_low, r.tpot_ms_high),
                    nbytes(r.memory_per_gpu_bytes), "yes" if r.fits else "no"))
    return out


def calibrated_by(rows: Sequence[Prediction]) -> str:
    by = sorted({r.calibrated_by for r in rows if r.calibrated_by})
    return "; ".join(by) if by else UNCALIBRATED


def assumptions(rows: Sequence[Prediction]) -> list[str]:
    """Every row's assumptions, each said once, in first-seen order."""
    seen: list[str] = []
    for r in rows:
        seen += [a for a in r.assumes if a not in seen]
    return seen


def predictions_text(rows: Sequence[Prediction]) -> str:
    """A table of the predictions, then the calibration and the assumptions."""
    table = [HEAD, *prediction_rows(rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines += ["", DEFINITIONS, "calibrated by: " + safe_text(calibrated_by(rows), True)]
    lines += ["assumes:", *(f"  - {safe_text(a, True)}" for a in assumptions(rows))]
    return "\n".join(lines) + "\n"


class PredictRenderer:
    """``rightsize serving predict``: the predictions of a list of points."""

    def __init__(self, model_name: str = "") -> None:
        self.model_name = model_name

    def text(self, model: Sequence[Prediction], style: Style) -> str:
        return predictions_text(model)

    def json(self, model: Sequence[Prediction]) -> Any:
        return {"predictions": [p.to_json() for p in model]}

    def html(self, model: Sequence[Prediction]) -> str:
        from rightsize.reports.html import environment

        return environment().get_template("serving_predict.html.j2").render(
            name=self.model_name, head=HEAD, rows=prediction_rows(model),
            definitions=DEFINITIONS, calibrated_by=calibrated_by(model),
            assumes=assumptions(model), version=__version__)
