"""Config reader vs the published module counts: every config in SHARED/configs against the
exact count its SOURCES.md lists (transformers on the meta device), as a markdown table.

Run:  python benchmarks/hf_config_counts.py /work/shared [--exact]

``--exact`` adds a column counted here with transformers (pip install rightsize[exact]).
Exits 1 when any config is more than 0.1% off.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rightsize.analyzers.sizing.hf_config import from_hf_config

ROW = re.compile(r"^\| (\S+\.json) \|.*?\| (\w+) \| ([\d,]+) \|", re.MULTILINE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shared", type=Path)
    parser.add_argument("--exact", action="store_true")
    args = parser.parse_args()
    configs = args.shared / "configs"
    head = "| config | model_type | parameters (SOURCES.md) | rightsize | difference |"
    print(head + (" transformers (meta) |" if args.exact else ""))
    print("|---|---|---:|---:|---:|" + ("---:|" if args.exact else ""))
    worst = 0.0
    for name, model_type, count in ROW.findall((configs / "SOURCES.md").read_text()):
        published = int(count.replace(",", ""))
        config = json.loads((configs / name).read_text())
        ours = from_hf_config(config).params().total
        worst = max(worst, abs(ours - published) / published)
        row = (f"| {name} | {model_type} | {published:,} | {ours:,} |"
               f" {ours - published:+,} ({(ours - published) / published:+.2%}) |")
        if args.exact:
            from rightsize.profiler.exact_params import exact_param_count

            row += f" {exact_param_count(config)[0]:,} |"
        print(row)
    return 1 if worst > 0.001 else 0


if __name__ == "__main__":
    sys.exit(main())
