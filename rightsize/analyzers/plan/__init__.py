"""``rightsize plan``: serving capacity and cluster sizing from a measured run.

Modules: :mod:`.demand` (demand curves), :mod:`.workload` (what the analysis measured),
:mod:`.serving` (KV cache bound for LLM serving), :mod:`.capacity` (throughput, replicas, cost),
:mod:`.partitions` (MIG slices, time-slicing) and :mod:`.plan` (the whole plan). Pure: no I/O;
definitions in docs/plan.md.
"""
