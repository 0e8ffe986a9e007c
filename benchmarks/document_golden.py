"""Golden check of the analysis document: dump it for every shared trace and sample run, then
compare two dumps (before/after a change).

    python benchmarks/document_golden.py dump /work/shared OUT_DIR
    python benchmarks/document_golden.py compare BEFORE_DIR AFTER_DIR

``dump`` writes one ``<input>.json`` per input (``ERROR ...`` for an input that fails) with the
repository path replaced by ``REPO``; ``compare`` says per file whether the text is identical,
only the key order differs, or the values differ, and exits 1 when any value differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("kineto", "nsys", "ncu", "dcgm")


def dump(shared: Path, out: Path) -> None:
    from rightsize.pipeline import analyze_paths

    out.mkdir(parents=True, exist_ok=True)
    paths = [p for kind in KINDS for p in sorted((shared / "traces" / kind).iterdir())]
    paths += sorted((REPO / "samples" / "runs").iterdir())
    for p in paths:
        try:
            text = json.dumps(analyze_paths([p]), indent=1, allow_nan=False)
        except Exception as exc:  # noqa: BLE001 - recorded, so a crash is compared too
            text = f"ERROR {type(exc).__name__}: {exc}"
        (out / f"{p.name}.json").write_text(text.replace(str(REPO), "REPO"))
        print(p.name, len(text), flush=True)


def compare(before: Path, after: Path) -> int:
    counts = {"identical": 0, "key order only": 0, "DIFFERENT": 0}
    for f in sorted(before.iterdir()):
        a, b = f.read_text(), (after / f.name).read_text()
        verdict = "identical" if a == b else "DIFFERENT"
        if verdict != "identical" and not a.startswith("ERROR") and not b.startswith("ERROR") \
                and json.loads(a) == json.loads(b):
            verdict = "key order only"
        counts[verdict] += 1
        if verdict != "identical":
            print(f"{verdict}: {f.name}")
    print(", ".join(f"{n} {k}" for k, n in counts.items()))
    return 1 if counts["DIFFERENT"] else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "dump":
        dump(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
