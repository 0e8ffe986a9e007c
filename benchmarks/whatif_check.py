"""What-ifs checked against measurements: for each pair of samples/whatif/pairs.json, the step
the 'before' run's recommendation predicts (point and range) and the step its 'after' run
measured, with the error of the point.

    python benchmarks/whatif_check.py [--markdown]

Each run is analyzed afresh from its traces (the current rules), not read from analysis.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "samples" / "whatif" / "pairs.json"


def check(pair: dict, analyze) -> dict:
    """``analyze``: run directory -> document (JSON form)."""
    before, after = analyze(ROOT / pair["before"]), analyze(ROOT / pair["after"])
    rec = next((r for r in before["recommendations"] if r["id"] == pair["rule"]), None)
    measured = after["metrics"]["breakdown_ms"]["step"]
    row = {**pair, "step_before_ms": before["metrics"]["breakdown_ms"]["step"],
           "measured_ms": measured, "fired": rec is not None}
    if rec is not None and rec.get("what_if"):
        w = rec["what_if"]
        row |= {"predicted_ms": w["step_ms"], "low_ms": w["step_ms_low"],
                "high_ms": w["step_ms_high"],
                "inside": w["step_ms_low"] <= measured <= w["step_ms_high"],
                "error_pct": 100.0 * (w["step_ms"] - measured) / measured}
    return row


def pairs() -> list[dict]:
    return json.loads(PAIRS.read_text())["pairs"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="the table of docs/validation.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from rightsize.pipeline import analyze_document

    def analyze(run: Path) -> dict:
        return analyze_document([str(run)]).to_json()

    rows = [check(p, analyze) for p in pairs()]
    if args.markdown:
        print("| advice (rule) | change made | step before | predicted (range) | measured "
              "after | point error |")
        print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        pred = (f"{r['predicted_ms']:.2f} ms ({r['low_ms']:.2f}-{r['high_ms']:.2f})"
                if "predicted_ms" in r else "rule did not fire")
        err = f"{r['error_pct']:+.0f}%" if "error_pct" in r else "-"
        mark = "" if r.get("inside") else " OUTSIDE"
        if args.markdown:
            print(f"| {r['rule']} | {r['change']} | {r['step_before_ms']:.2f} ms | {pred} | "
                  f"{r['measured_ms']:.2f} ms{mark} | {err} |")
        else:
            print(f"{r['rule']:26} {Path(r['before']).name:30} {r['step_before_ms']:8.2f} ms -> "
                  f"predicted {pred:30} measured {r['measured_ms']:7.2f} ms{mark} ({err})")
    inside = sum(bool(r.get("inside")) for r in rows)
    print(f"\n{inside} of {len(rows)} measured steps inside the predicted range")
    return 0 if inside == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
