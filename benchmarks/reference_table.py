"""Print a markdown table: rightsize vs the TensorBoard plugin and HTA on the shared traces.

Usage: python benchmarks/reference_table.py [SHARED_DIR]   (default ../shared)
The plugin/HTA numbers come from shared/reference/*.json (their own output); rightsize's are
computed here, once with its defect fixes (the default) and once with the plugin's defects
reproduced ("compat"), which shows the definitions themselves match.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rightsize.analyzers.metrics import hta, tb_plugin
from rightsize.analyzers.metrics.steps import StepOptions, find_steps
from rightsize.traces.kineto import read_kineto

COMPAT = (StepOptions(legacy_runtime_only=True, gpu_annotation_steps=True),
          tb_plugin.BreakdownOptions(legacy_runtime_only=True, plugin_comm_rules=True))


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared"
    tb = json.loads((shared / "reference/tb-plugin-reference.json").read_text())
    href = json.loads((shared / "reference/hta-reference.json").read_text())
    print("| trace | plugin util / SM eff / occ | rightsize (compat) | rightsize | "
          "HTA idle / compute / non-compute | rightsize |")
    print("|---|---|---|---|---|---|")
    for name in sorted(tb):
        trace = read_kineto(shared / "traces/kineto" / name)
        r = tb[name]
        cells = []
        dev = next(iter(r["gpu_util"]), None)
        cells.append("-" if dev is None else " / ".join(
            fmt(v) for v in (100 * r["gpu_util"][dev], 100 * r["sm_eff"].get(dev, float("nan"))
                             if dev in r["sm_eff"] else None, r["occupancy"].get(dev))))
        for steps_opt, bd_opt in (COMPAT, (StepOptions(), tb_plugin.BreakdownOptions())):
            steps = find_steps(trace, steps_opt)
            d = {str(m.device): m for m in tb_plugin.device_metrics(trace, steps)}.get(dev)
            cells.append("-" if d is None else " / ".join(
                fmt(v) for v in (d.gpu_util_pct, d.sm_efficiency_pct, d.achieved_occupancy_pct)))
        h = href.get(name, {})
        if "temporal" in h:
            t = h["temporal"]
            cells.append(f"{t['idle_time_pctg']:.2f} / {t['compute_time_pctg']:.2f} / "
                         f"{t['non_compute_time_pctg']:.2f}")
        else:
            cells.append("HTA fails: " + h.get("error", "?").split(":")[0])
        mine = hta.temporal_breakdown(trace)
        cells.append("no GPU activity" if mine is None else " / ".join(
            fmt(mine.pct(v)) for v in (mine.idle_us, mine.compute_us, mine.non_compute_us)))
        short = name.replace(".json.gz", "").replace(".pt.trace", "")[:48]
        print(f"| {short} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
