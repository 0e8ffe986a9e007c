"""docs/validation.md's table of the expectations suite (tests/expectations/expectations.json).

    python benchmarks/expectations_table.py > /tmp/table.md

One row per input: the expected verdict, recommended GPU (or none), the rules that must and must
not fire, and why; tests/test_expectations.py checks every row against the analysis (and the
phrases an entry says the page must and must never say). ``built:NAME`` inputs are built at test
time (tests/expectations/built.py).
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
        base, _, steps = name.partition(" --steps ")
        short = base.removeprefix("../shared/traces/").removeprefix("samples/runs/")[:60] \
            + (f" --steps {steps}" if steps else "")
        print(f"| {short} | {want['bound'] or 'none'} | {want['recommended'] or 'none'} | "
              f"{', '.join(want['must_fire']) or '-'} | {', '.join(want['must_not_fire']) or '-'}"
              f" | {want['why']} |")


if __name__ == "__main__":
    main()
