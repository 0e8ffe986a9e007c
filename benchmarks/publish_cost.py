#!/usr/bin/env python3
"""What publishing an analysis document costs: ``node.published`` (rounding from the fields'
``num`` metadata, no JSON) against the JSON round trip it replaced
(``Document.from_json(doc.to_json())``), on the unrounded documents of the expectations suite's
inputs (tests/expectations/expectations.json; the ``../shared`` ones where present).

Both run on the same documents in one process, alternately, ``--repeat`` times; the median and
the spread of each are printed, and every pair of results is checked equal (the document the
analysis publishes must be the one its JSON reads back). Usage::

    PYTHONPATH=. python benchmarks/publish_cost.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def documents() -> list:
    """The unrounded document of every input present, as ``build.assemble`` made it."""
    from rightsize.analyzers.document import build
    from rightsize.pipeline import analyze_document

    made: list = []
    publish = build.rounded
    build.rounded = lambda doc: made.append(doc) or publish(doc)  # type: ignore[assignment]
    names = json.loads((REPO / "tests/expectations/expectations.json").read_text())["inputs"]
    for name in names:
        path = REPO.parent / name[3:] if name.startswith("../") else REPO / name
        if path.exists():
            analyze_document([path])
    build.rounded = publish  # type: ignore[assignment]
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from rightsize.analyzers.document import Document
    from rightsize.node import published

    docs = documents()
    times: dict[str, list[float]] = {"published": [], "round trip": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        ours = [published(d) for d in docs]
        t1 = time.perf_counter()
        theirs = [Document.from_json(d.to_json()) for d in docs]
        t2 = time.perf_counter()
        times["published"].append(t1 - t0)
        times["round trip"].append(t2 - t1)
        assert ours == theirs, "published differs from the JSON read back"
    print(f"{len(docs)} documents, {args.repeat} runs (seconds for all of them)")
    for name, ts in times.items():
        print(f"  {name:10}  median {statistics.median(ts):.3f}  min {min(ts):.3f}  "
              f"max {max(ts):.3f}")


if __name__ == "__main__":
    main()
