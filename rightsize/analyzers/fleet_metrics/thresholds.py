"""The named numbers ``rightsize fleet metrics`` decides with: :class:`Thresholds` is the fleet
metrics group of the one threshold table (``rightsize.analyzers.thresholds``, each with its
reason and label); the CLI may change ``headroom``, ``min_window_s`` and the price provider,
nothing else moves silently. Documented in docs/fleet-metrics.md and docs/thresholds.md.
"""

from __future__ import annotations

from rightsize.analyzers.thresholds import DAY_S, HOUR_S
from rightsize.analyzers.thresholds import FleetMetricsThresholds as Thresholds

__all__ = ["DAY_S", "HOURS_PER_MONTH", "HOUR_S", "Thresholds"]

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12: the month cloud price sheets use
