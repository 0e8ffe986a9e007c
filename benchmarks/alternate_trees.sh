#!/bin/bash
# Alternate `rightsize analyze TRACE --format json` between source trees, REPS rounds, and print
# each tree's wall and CPU (user + sys) seconds, median and range, and its peak RSS.
#
#   benchmarks/alternate_trees.sh [--prio] [--hta HTA_PYTHON] TRACE REPS LABEL=TREE [...]
#
# TREE is a directory holding a `rightsize/` package (e.g. `git archive REV rightsize | tar -x
# -C TREE`, plus the compiled _kscan of that era, then `python -m compileall -q TREE/rightsize`).
# PY (default /work/main/.venv/bin/python) runs every tree. --prio runs each command in a new
# session whose autogroup has nice -20 (root only): on a machine shared with other work it
# stands in for an idle one (the other sessions' tasks still run, at a small share of the CPU).
# --hta adds HolisticTraceAnalysis 0.5.0 (its load and temporal breakdown, as
# analyze_large.py runs it) after each round, under the same setting.
set -euo pipefail
PRIO=0
HTA=""
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --prio) PRIO=1; shift ;;
    --hta) HTA=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TRACE=$1; REPS=$2; shift 2
PY=${PY:-/work/main/.venv/bin/python}
OUT=$(mktemp -d)
HTA_DIR=$(mktemp -d)
ln -s "$(realpath "$TRACE")" "$HTA_DIR/trace.json"
cat > "$HTA_DIR/hta_child.py" <<'PY'
import sys
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
PY
run() {  # label tree ("hta": HolisticTraceAnalysis)
  local cmd=(/usr/bin/time -f "$1 %e %U %S %M" env PYTHONPATH="$2" "$PY" -m rightsize analyze
             "$TRACE" --format json --no-report -q)
  if [[ $1 == hta ]]; then
    cmd=(/usr/bin/time -f "hta %e %U %S %M" "$HTA" "$HTA_DIR/hta_child.py" "$HTA_DIR")
  fi
  if [[ $PRIO == 1 ]]; then
    setsid bash -c 'echo -20 > /proc/self/autogroup; exec nice -n -20 "$@"' _ "${cmd[@]}" \
      2>&1 >"$OUT/$1.json" | tail -1
  else
    "${cmd[@]}" 2>&1 >"$OUT/$1.json" | tail -1
  fi
}
cd /tmp
for _ in $(seq "$REPS"); do
  for spec in "$@"; do run "${spec%%=*}" "${spec#*=}"; done
  if [[ -n $HTA ]]; then run hta -; fi
done | "$PY" -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    label, wall, user, sys_s, kib = line.split()
    runs.setdefault(label, []).append((float(wall), float(user) + float(sys_s), int(kib)))
for label, r in runs.items():
    w, c = sorted(x[0] for x in r), sorted(x[1] for x in r)
    m = sorted(x[2] / 1024 for x in r)
    print(f"{label}: wall {statistics.median(w):.2f} s ({w[0]:.2f}-{w[-1]:.2f}), "
          f"CPU {statistics.median(c):.2f} s ({c[0]:.2f}-{c[-1]:.2f}), "
          f"peak {m[0]:.0f}-{m[-1]:.0f} MiB, {len(r)} runs")
'
rm -f "$OUT/hta.json"
for spec in "$@"; do cmp -s "$OUT/${1%%=*}.json" "$OUT/${spec%%=*}.json" \
  || echo "note: ${spec%%=*}'s JSON differs from ${1%%=*}'s"; done
rm -rf "$OUT" "$HTA_DIR"
uptime
