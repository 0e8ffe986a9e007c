"""Terminal rendering of the analysis document: verdict-first, compact, colors only on a TTY.

Input: the ``rightsize analyze`` JSON document (``rightsize.reports.json_doc``). Output: text.
"""

from __future__ import annotations

from typing import Any

_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"


def _fmt(v: Any, unit: str = "", nd: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}{unit}"
    return f"{v}{unit}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n} B"


def render_text(doc: dict[str, Any], color: bool = False) -> str:
    b = (lambda s: f"{_BOLD}{s}{_RESET}") if color else (lambda s: s)
    dim = (lambda s: f"{_DIM}{s}{_RESET}") if color else (lambda s: s)
    m = doc["metrics"]
    st = doc["steps"]
    lines: list[str] = []
    diag = doc.get("diagnosis")
    if diag:
        lines.append(b(f"Verdict: {diag['bound']}-bound") +
                     f" (confidence {diag['confidence']:.2f})")
        for ev in diag.get("evidence", [])[:3]:
            lines.append(f"  - {ev}")
        lines.append("")
    primary = next((d for d in doc["devices"] if d.get("primary")), None)
    dev = f"{primary['name']} (device {primary['index']})" if primary else "no GPU activity"
    lines.append(b("Device: ") + dev)
    lines.append(b("Steps: ") + f"{st['count']} ({st['source']}), mean {_fmt(st['mean_ms'], ' ms', 2)}"
                 f", min {_fmt(st['min_ms'], ' ms', 2)}, max {_fmt(st['max_ms'], ' ms', 2)}")
    lines.append(b("GPU: ") + f"utilization {_fmt(m['gpu_util_pct'], '%')}, "
                 f"est. SM efficiency {_fmt(m['sm_efficiency_pct'], '%')}, "
                 f"est. achieved occupancy {_fmt(m['achieved_occupancy_pct'], '%')}, "
                 f"tensor-core kernels {_fmt(m['tensor_core_kernel_pct'], '%')} "
                 f"({_fmt(m['tensor_core_kernel_pct_extended'], '%')} with newer names)")
    if m["breakdown_ms"]:
        bd = m["breakdown_ms"]
        step = bd["step"] or 0.0
        lines.append(b("Step time breakdown") + dim(" (TensorBoard plugin definition, mean per step)"))
        for key in ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader",
                    "cpu_exec", "other"):
            pct = 100.0 * bd[key] / step if step else 0.0
            bar = "#" * int(round(pct / 4))
            lines.append(f"  {key:<14}{bd[key]:>12,.3f} ms {pct:6.1f}%  {bar}")
    if m["hta"]:
        h = m["hta"]
        lines.append(b("GPU time") + dim(" (HTA temporal breakdown)") +
                     f": idle {_fmt(h['idle_pct'], '%')}, compute {_fmt(h['compute_pct'], '%')},"
                     f" non-compute {_fmt(h['non_compute_pct'], '%')}")
    lines.append(b("Peak memory: ") + _bytes(m["peak_memory_bytes"]))
    for c in m["memcpy"][:4]:
        lines.append(f"  memcpy {c['direction']} {c['host_memory'] or ''}: {c['count']} copies, "
                     f"{_bytes(c['bytes'])}, {_fmt(c['time_ms'], ' ms', 3)}, {_fmt(c['gbps'], ' GB/s')}")
    if doc["top_kernels"]:
        lines.append(b("Top kernels"))
        for k in doc["top_kernels"][:5]:
            lines.append(f"  {k['pct']:5.1f}%  {k['total_ms']:>10.3f} ms  {k['calls']:>6}x  "
                         f"{_short(k['name'])}")
    recs = doc.get("recommendations") or []
    if recs:
        lines.append(b("Recommendations"))
        for r in recs[:5]:
            lines.append(f"  - {r['title']}")
    for note in doc.get("notes", []):
        lines.append(dim(f"note: {note}"))
    return "\n".join(lines) + "\n"


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
