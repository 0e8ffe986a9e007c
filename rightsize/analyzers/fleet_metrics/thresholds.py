"""The named numbers ``rightsize fleet metrics`` decides with, each with its reason.

One frozen :class:`Thresholds`; the CLI may change ``headroom``, ``min_window_s`` and the price
provider, nothing else moves silently. Documented in docs/fleet-metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12: the month cloud price sheets use
HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Thresholds:
    # Memory and compute both keep this headroom: the peak memory x (1 + headroom) must fit,
    # and the p95 activity must stay under (1 - headroom) of the capacity (rightsize plan's
    # default headroom, so a slice chosen here is one plan would accept).
    headroom: float = 0.20
    # Under 6 h a window cannot show a daily peak: no recommendation.
    min_window_s: float = 6 * HOUR_S
    # A day sees one daily cycle (medium confidence at most below it), a week sees weekdays and
    # weekends (krr's default history is 14 days; `--since` defaults to 7d).
    day_window_s: float = DAY_S
    week_window_s: float = 7 * DAY_S
    # Fewer than half of the window's steps sampled: the gaps could hide the peak.
    min_coverage: float = 0.50
    # Coverage at which gaps no longer lower the confidence.
    full_coverage: float = 0.90
    # Fewer samples than this of memory or activity: percentiles are not worth stating.
    min_samples: int = 30
    # Options within this share of the cheapest count as a tie, broken by least disruption
    # (keep, fewer replicas, MIG, time share, smaller GPU): a 5% saving is not worth a move.
    tie_share: float = 0.10
    # Moving to another GPU type is a migration on a datasheet projection: it must cost this
    # much less than the best option on the current GPU to be recommended over it.
    move_share: float = 0.25
    # The percentile activity is sized at; p99 is reported beside it.
    percentile: float = 0.95

    @property
    def target_pct(self) -> float:
        """Busy share of a slice's (or GPU's) capacity allowed at the p95: 80% by default."""
        return 100.0 * (1.0 - self.headroom)
