"""``rightsize fleet metrics``: GPU workloads right-sized from cluster metrics (issue 32).

Series of dcgm-exporter and cAdvisor metrics (read by :mod:`rightsize.traces.prometheus` and
:mod:`rightsize.traces.fleet_files`) are grouped into workloads (:mod:`.workloads`), measured
over the window (:mod:`.stats`), and each gets the cheapest placement that holds its peak memory
and carries its p95 activity (:mod:`.options`), with evidence and confidence (:mod:`.analyze`).
Pure functions; the nodes are in :mod:`.model`, the named numbers in :mod:`.thresholds`.
"""

from rightsize.analyzers.fleet_metrics.analyze import analyze
from rightsize.analyzers.fleet_metrics.model import (
    Confidence,
    FleetMetrics,
    Option,
    Outcome,
    WorkloadRow,
)
from rightsize.analyzers.fleet_metrics.thresholds import Thresholds

__all__ = ["Confidence", "FleetMetrics", "Option", "Outcome", "Thresholds", "WorkloadRow",
           "analyze"]
