"""Workloads of ``rightsize fleet metrics`` as rows of the fleet table (source ``metrics``).

Input: a :class:`~rightsize.analyzers.fleet_metrics.FleetMetrics` (its
:class:`~rightsize.analyzers.fleet_metrics.model.WorkloadRow` s), what was read (``paths``:
the Prometheus URL without credentials, or the files) and when. Output: plain row dicts with
every column of :data:`rightsize.fleet.schema.COLUMNS`, for
:meth:`rightsize.fleet.table.FleetTable.replace`. Pure; docs/fleet-table.md says, per column,
what a metrics row holds and why a column it cannot fill is null.

A row's key is the SHA-256 of ``metrics``, the workload's labels and its window (first and
last sample, to the second): the same workload over the same window is the same key (a re-run
replaces its row), another window a new row (the report reads each workload at its newest).
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rightsize import __version__
from rightsize.fleet.schema import COLUMNS, SCHEMA_VERSION, SOURCE_METRICS, STATUS_OK

if TYPE_CHECKING:
    from rightsize.analyzers.fleet_metrics import FleetMetrics, WorkloadRow

KIND = "workload"
OVER = ("fewer-replicas", "mig", "time-share", "smaller-gpu",  # a cheaper placement holds it
        "idle")  # or nothing ran: release it


def public_url(url: str) -> str:
    """``url`` without a user or password (never stored in a table others read)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(UTC)


def key_of(r: WorkloadRow) -> str:
    ident = json.dumps({"labels": dict(r.labels), "start": r.window_start,
                        "end": r.recorded_at}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{SOURCE_METRICS}\n{ident}".encode()).hexdigest()


def sizing_verdict(outcome: str) -> str | None:
    """``keep`` -> right-sized, a cheaper placement -> over-provisioned, inconclusive -> None
    (fleet metrics never recommends a bigger placement)."""
    if outcome == "keep":
        return "right-sized"
    return "over-provisioned" if outcome in OVER else None


def row(r: WorkloadRow, paths: list[str], scanned_at: datetime) -> dict[str, Any]:
    from rightsize.fleet.analyze import one_line

    out: dict[str, Any] = dict.fromkeys(COLUMNS)
    labels = dict(r.labels)
    start, end = _when(r.window_start), _when(r.recorded_at)
    now, rec = r.cost_per_month_now_usd, r.cost_per_month_recommended_usd
    whole = r.recommended_profile is None and (r.share_of_gpu or 0) >= 1
    out.update(
        key=key_of(r), job=r.workload, kind=KIND, source=SOURCE_METRICS, paths=list(paths),
        recorded_at=end, recorded_at_source=SOURCE_METRICS, window_start=start,
        scanned_at=scanned_at, rightsize_version=__version__, schema_version=SCHEMA_VERSION,
        status=STATUS_OK,
        team=labels.get("team") or labels.get("namespace") or None,
        project=labels.get("project") or labels.get("owner") or None,
        labels_source=SOURCE_METRICS, device="gpu", gpu=r.gpu, gpu_reported=r.gpu_reported,
        gpus=r.replicas_now * r.gpus_per_replica, nodes=r.nodes or None,
        confidence_level=r.confidence.value if r.confidence is not None else None,
        gpu_util_pct=r.gpu_util_mean_pct, sm_efficiency_pct=r.sm_active_mean_pct,
        peak_memory_bytes=r.mem_used_peak_bytes,
        sizing_verdict=sizing_verdict(r.outcome.value),
        recommended_gpu=r.recommended_gpu,
        recommended_gpus=((r.replicas_recommended or 0) * r.gpus_per_replica
                          if r.recommended_gpu is not None and whole else None),
        recommended=r.recommended, sizing_reason=one_line(r.why, 1000) if r.why else None,
        savings_pct=(100 * (now - rec) / now if now and rec is not None else None),
        usd_per_gpu_hour=r.usd_per_gpu_hour, usd_per_month=now,
        recommended_usd_per_month=rec,
        run_gpu_hours=r.gpus_now * r.window_s / 3600, rules=[])
    return out


def rows(result: FleetMetrics, paths: list[str], scanned_at: datetime) -> list[dict[str, Any]]:
    return [row(r, paths, scanned_at) for r in result.rows]
