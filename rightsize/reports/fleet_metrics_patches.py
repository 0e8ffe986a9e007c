"""Kubernetes patches for the workloads ``rightsize fleet metrics`` would change.

Input: a :class:`~rightsize.analyzers.fleet_metrics.model.WorkloadRow` whose outcome is a change
(fewer replicas, a MIG slice, a time share, a smaller GPU) and whose owner is a Deployment or
StatefulSet. Output: :class:`Patch` objects: a strategic-merge patch of the owner (``kubectl
patch --type strategic --patch-file``) that sets the container's GPU resource
(``nvidia.com/mig-<profile>`` with the ``mixed`` MIG strategy, else ``nvidia.com/gpu``; the old
resource set to null, which removes it), the replicas, and the node selector of GPU feature
discovery's labels (``nvidia.com/gpu.product`` for another GPU,
``nvidia.com/gpu.sharing-strategy: time-slicing`` for a time share); and for fewer replicas an
HPA (autoscaling/v2) and a KEDA ScaledObject on the GPU utilization, as ``rightsize plan``
writes them. Each number carries a comment saying where it came from.

:func:`validation_object` is the patch merged onto the smallest object of its kind that the
Kubernetes schemas accept (nulls dropped: in a merge patch they delete, they are not values);
the CLI validates that with ``kubernetes-validate``. Pure.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from rightsize.analyzers.fleet_metrics.model import Outcome, WorkloadRow
from rightsize.reports.placement import gpu_nodes
from rightsize.reports.yaml_emit import Note, dump, plain

PATCHABLE = ("Deployment", "StatefulSet")
GPU_METRIC = "DCGM_FI_DEV_GPU_UTIL"


@dataclass(frozen=True, slots=True)
class Patch:
    filename: str
    obj: dict[str, Any]  # with Note wrappers
    text: str
    kind: str  # "patch" (merged onto the live object) or "object" (applied as it is)


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return s[:63].strip("-") or "workload"


def patchable(r: WorkloadRow) -> str | None:
    """Why no patch is written for ``r`` (None: one is)."""
    if r.outcome in (Outcome.KEEP, Outcome.INCONCLUSIVE, Outcome.IDLE):
        return "no change"
    if "owner" not in r.labels or "namespace" not in r.labels:
        return "no namespace/owner labels (a --group-by or file workload)"
    if r.owner_kind not in PATCHABLE:
        return f"its pods look like a {r.owner_kind or 'bare pod'}'s, not a Deployment's"
    if not r.containers:
        return "no container label on its series"
    return None


def owner_patch(r: WorkloadRow) -> dict[str, Any]:
    resource = r.recommended_resource or "nvidia.com/gpu"
    why = f"{r.recommended} ({r.outcome}, confidence {r.confidence})"
    res: dict[str, Any] = {"requests": {resource: Note("1", why)},
                           "limits": {resource: Note("1", "extended resources: limit = request")}}
    if r.mig_profile_now and resource != f"nvidia.com/mig-{r.mig_profile_now}":
        old = f"nvidia.com/mig-{r.mig_profile_now}"
    else:
        old = "nvidia.com/gpu"
    if old != resource:
        res["requests"][old] = Note(None, "null removes the old resource")
        res["limits"][old] = Note(None, "null removes the old resource")
    pod: dict[str, Any] = {"containers": [{"name": c, "resources": res} for c in r.containers]}
    if r.outcome is Outcome.SMALLER_GPU and r.recommended_gpu:
        pod.update(gpu_nodes(r.recommended_gpu, f"the smaller GPU ({r.recommended_gpu})"))
    elif r.outcome is Outcome.TIME_SHARE:
        pod["nodeSelector"] = {"nvidia.com/gpu.sharing-strategy": Note(
            "time-slicing", f"nodes whose device plugin shares each GPU "
            f"{round(1 / (r.share_of_gpu or 1))} ways (sharing.timeSlicing.replicas)")}
    spec: dict[str, Any] = {"template": {"spec": pod}}
    if r.replicas_recommended is not None and r.replicas_recommended != r.replicas_now:
        spec = {"replicas": Note(r.replicas_recommended,
                                 f"was {r.replicas_now}: summed activity p95 "
                                 f"{r.summed_activity_p95_pct or 0:.1f}% of one GPU"), **spec}
    return {"apiVersion": "apps/v1", "kind": r.owner_kind,
            "metadata": {"name": r.labels["owner"], "namespace": r.labels["namespace"]},
            "spec": spec}


def _bounds(r: WorkloadRow, target_pct: float) -> tuple[int, int]:
    low = r.replicas_recommended or 1
    peak = -(-(r.summed_activity_max_pct or 0) // target_pct) if target_pct > 0 else low
    return low, int(max(low, min(peak, r.replicas_now)))


def hpa(r: WorkloadRow, target_pct: float) -> dict[str, Any]:
    low, high = _bounds(r, target_pct)
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": r.labels["owner"], "namespace": r.labels["namespace"]},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": r.owner_kind,
                                        "name": r.labels["owner"]},
                     "minReplicas": Note(low, "replicas that carry the p95"),
                     "maxReplicas": Note(high, "replicas that carry the window's peak"),
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": Note(GPU_METRIC, "dcgm-exporter via the "
                                                             "Prometheus adapter")},
                         "target": {"type": "AverageValue", "averageValue": Note(
                             f"{target_pct:g}", "busy share per GPU at the headroom")}}}]}}


def scaled_object(r: WorkloadRow, target_pct: float, server: str) -> dict[str, Any]:
    low, high = _bounds(r, target_pct)
    query = (f'sum({GPU_METRIC}{{namespace="{r.labels["namespace"]}",'
             f'pod=~"{re.escape(r.labels["owner"])}-.*"}})')
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": r.labels["owner"], "namespace": r.labels["namespace"]},
            "spec": {"scaleTargetRef": {"name": r.labels["owner"], "kind": r.owner_kind},
                     "minReplicaCount": Note(low, "replicas that carry the p95"),
                     "maxReplicaCount": Note(high, "replicas that carry the window's peak"),
                     "triggers": [{"type": "prometheus", "metadata": {
                         "serverAddress": Note(server, "your Prometheus"),
                         "query": Note(query, "the workload's summed GPU utilization"),
                         "threshold": Note(f"{target_pct:g}", "per replica, at the headroom")}}]}}


def patches(r: WorkloadRow, target_pct: float, server: str) -> tuple[Patch, ...]:
    if patchable(r) is not None:
        return ()
    base = slug(f"{r.labels['namespace']}-{r.labels['owner']}")
    head = [f"rightsize fleet metrics: {r.workload}: {r.recommended}",
            f"evidence: {'; '.join(r.evidence)}"]
    out = [Patch(f"{base}.patch.yaml", owner_patch(r),
                 dump(owner_patch(r), [*head, "kubectl patch --type strategic --patch-file"]),
                 "patch")]
    if r.outcome is Outcome.FEWER_REPLICAS:
        out.append(Patch(f"{base}.hpa.yaml", hpa(r, target_pct),
                         dump(hpa(r, target_pct),
                              [*head, "apply the HPA or the KEDA ScaledObject, not both"]),
                         "object"))
        out.append(Patch(f"{base}.keda-scaledobject.yaml", scaled_object(r, target_pct, server),
                         dump(scaled_object(r, target_pct, server),
                              [*head, "KEDA alternative (KEDA makes its own HPA)"]), "object"))
    return tuple(out)


def _drop_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def validation_object(p: Patch) -> dict[str, Any]:
    """The patch on the smallest valid object of its kind (an object: itself)."""
    obj = _drop_nulls(plain(p.obj))
    if p.kind != "patch":
        return obj
    full = copy.deepcopy(obj)
    labels = {"app": obj["metadata"]["name"]}
    spec = full["spec"]
    spec.setdefault("selector", {"matchLabels": labels})
    if obj["kind"] == "StatefulSet":
        spec.setdefault("serviceName", obj["metadata"]["name"])
    tpl = spec["template"]
    tpl.setdefault("metadata", {"labels": labels})
    for c in tpl["spec"]["containers"]:
        c.setdefault("image", "example.invalid/image:tag")
    return full
