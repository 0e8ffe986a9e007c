"""Print a markdown table of rightsize's verdict on every shared trace and sample run.

Usage: python benchmarks/verdicts.py [SHARED_DIR]   (default ../shared)
Columns: verdict, confidence, the shares behind it, and the first piece of evidence (for an
``inconclusive`` verdict, its reason and what to record instead), so a reader can judge each
verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rightsize.pipeline import analyze_paths

REPO = Path(__file__).resolve().parents[1]


def row(label: str, path: Path) -> str:
    doc = analyze_paths([path])
    d = doc["diagnosis"]
    if d is None:
        return f"| {label} | - | - | no steps | - |"
    shares = ", ".join(f"{k} {v:.0f}" for k, v in sorted(d["shares_pct"].items(),
                                                          key=lambda x: -x[1]) if v >= 0.5)
    ev = d["evidence"][0].replace("|", "/") if d["evidence"] else ""
    conf = "-" if d["confidence"] is None else f"{d['confidence']:.2f}"
    return f"| {label} | **{d['bound']}** | {conf} | {shares} | {ev} |"


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared"
    print("| input | verdict | confidence | shares (% of step) | top evidence |")
    print("|---|---|---|---|---|")
    for path in sorted((shared / "traces/kineto").glob("*.json.gz")):
        print(row(path.name.replace(".json.gz", "")[:50], path))
    for path in sorted((shared / "traces/nsys").glob("*.sqlite")):
        print(row(path.name, path))
    for path in sorted((REPO / "samples/runs").iterdir()):
        print(row(f"samples/runs/{path.name}", path))


if __name__ == "__main__":
    main()
