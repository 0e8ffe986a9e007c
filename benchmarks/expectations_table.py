"""docs/validation.md's table of the expectations suite (tests/expectations/expectations.json).

    python benchmarks/expectations_table.py > /tmp/table.md

One row per input: the expected verdict, recommended GPU (or none), the rules that must and must
not fire, and why; tests/test_expectations.py checks every row against the analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    data = json.loads((REPO / "tests" / "expectations" / "expectations.json").read_text())
    print("| input | verdict | recommended GPU | must fire | must not fire | why |")
    print("|---|---|---|---|---|---|")
    for name, want in sorted(data["inputs"].items()):
        short = name.removeprefix("../shared/traces/").removeprefix("samples/runs/")
        print(f"| {short[:60]} | {want['bound']} | {want['recommended'] or 'none'} | "
              f"{', '.join(want['must_fire']) or '-'} | {', '.join(want['must_not_fire']) or '-'}"
              f" | {want['why']} |")


if __name__ == "__main__":
    main()
