"""Kubernetes manifests for a serving plan: a Deployment with resource requests, an HPA
(autoscaling/v2) on DCGM GPU utilization, and a KEDA ScaledObject on a Prometheus query.

Input: a :class:`~rightsize.analyzers.plan.plan.Plan` with a recommended GPU. Output:
:class:`Manifest` objects (file name, the object, its YAML text with comments saying where each
number came from). :func:`check` validates the fields this module emits, structurally, without
a cluster (the tests also validate against the Kubernetes OpenAPI schemas of the
``kubernetes-validate`` package when it is installed). Pure: the CLI writes the files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from rightsize.analyzers.plan.plan import Plan
from rightsize.reports.placement import gpu_nodes
from rightsize.reports.yaml_emit import Note, dump, plain

DCGM_METRIC = "DCGM_FI_DEV_GPU_UTIL"  # dcgm-exporter, through the Prometheus adapter
MIB = 2**20
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # RFC 1123 label (Deployment name)


@dataclass(frozen=True, slots=True)
class Manifest:
    filename: str
    obj: dict[str, Any]  # with Note wrappers; ``plain(obj)`` is what YAML readers return
    text: str


def _resources(plan: Plan) -> dict[str, Any]:
    part = plan.partition(plan.recommended)
    on = plan.deploy_on
    # a whole GPU: the vendor's resource (MIG exists on NVIDIA only)
    gpu_key = on.resource if on else part.resource if part and part.kind != "mig" \
        else "nvidia.com/gpu"
    if on is not None:
        why = f"{on.kind} on {plan.recommended}: {on.reason}"
    else:
        why = f"one whole {plan.recommended}" + (
            f" (a smaller share: {part.reason})" if part and part.kind in ("mig", "time-slicing")
            else f" ({part.reason})" if part else "")
    requests: dict[str, Any] = {}
    host = plan.workload.host
    headroom = plan.inputs.headroom
    if host is not None:
        cpu_m = max(100, math.ceil(host.cpu_cores_peak * 1000 * (1 + headroom) / 100) * 100)
        mem_mi = math.ceil(host.rss_bytes_peak * (1 + headroom) / MIB)
        requests["cpu"] = Note(f"{cpu_m}m", f"peak job CPU {host.cpu_cores_peak:.2f} cores over "
                                            f"{host.samples} host samples, +{headroom:.0%}")
        requests["memory"] = Note(f"{mem_mi}Mi", f"peak job RSS {host.rss_bytes_peak / MIB:.0f}"
                                                 f" MiB over {host.samples} host samples, "
                                                 f"+{headroom:.0%}")
    requests[gpu_key] = Note("1", why)
    limits: dict[str, Any] = {gpu_key: Note("1", "extended resources: limit = request")}
    if "memory" in requests:
        limits["memory"] = requests["memory"].value
    return {"requests": requests, "limits": limits}


def deployment(plan: Plan, name: str, image: str) -> dict[str, Any]:
    cap = plan.capacity(plan.recommended)
    assert cap is not None and cap.replicas is not None
    res = _resources(plan)
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": Note(1, "one replica on the slice serves the peak") if plan.deploy_on
            else Note(cap.replicas.p95, "p95 of the replicas over the demand curve; the "
                                        "autoscaler takes over from here"),
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                **_nodes(plan),
                "containers": [{"name": name, "image": Note(image, "your serving image"),
                                "resources": res}]}},
        },
    }


def _nodes(plan: Plan) -> dict[str, Any]:
    """The nodes the pods may land on: those with the GPU the plan sized (as the MIG slice or
    time share it deploys on), by GPU feature discovery's product label."""
    gpu = plan.recommended
    assert gpu is not None
    on = plan.deploy_on
    if on is None:
        return gpu_nodes(gpu, f"the GPU the plan sized ({gpu})")
    return gpu_nodes(gpu, f"{gpu} as the plan's {on.kind}" + (f" {on.profile}" if on.profile
                                                               else ""), on.kind, on.profile)


def _bounds(plan: Plan) -> tuple[int, int]:
    cap = plan.capacity(plan.recommended)
    assert cap is not None and cap.replicas is not None
    if plan.deploy_on is not None:
        return 1, 1  # one replica on the slice serves the peak
    return min(cap.replicas.series), cap.replicas.peak


def hpa(plan: Plan, name: str) -> dict[str, Any]:
    low, peak = _bounds(plan)
    assert plan.hpa_target_pct is not None and plan.util_on_recommended_pct is not None
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": Note(low, "fewest replicas the demand curve needs"),
            "maxReplicas": Note(max(low, peak), "replicas at the demand peak"),
            "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": Note(DCGM_METRIC, "dcgm-exporter via the Prometheus adapter")},
                "target": {"type": "AverageValue", "averageValue": Note(
                    str(plan.hpa_target_pct),
                    f"GPU busy {plan.util_on_recommended_pct:.1f}% at full load on "
                    f"{plan.recommended} x (1 - headroom {plan.inputs.headroom:g})")}}}],
        },
    }


def scaled_object(plan: Plan, name: str, query: str, server: str) -> dict[str, Any]:
    low, peak = _bounds(plan)
    cap = plan.capacity(plan.recommended)
    assert cap is not None and plan.keda_threshold_per_s is not None
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"name": name},
            "minReplicaCount": Note(low, "fewest replicas the demand curve needs"),
            "maxReplicaCount": Note(max(low, peak), "replicas at the demand peak"),
            "triggers": [{"type": "prometheus", "metadata": {
                "serverAddress": Note(server, "your Prometheus"),
                "query": Note(query, f"the demand rate, in {plan.inputs.unit}/s"),
                "threshold": Note(f"{plan.keda_threshold_per_s:g}",
                                  f"{plan.inputs.unit}/s per replica at the projected step"
                                  f"{' on the slice' if plan.deploy_on else ''} x (1 - headroom "
                                  f"{plan.inputs.headroom:g})")}}],
        },
    }


def manifests(plan: Plan, name: str, image: str, query: str,
              server: str) -> tuple[Manifest, ...]:
    """The manifests for the recommended GPU (none without one); the HPA only when the
    utilization at the SLO is known."""
    if plan.recommended is None:
        return ()
    src = f"rightsize plan: {plan.recommended}, demand {plan.inputs.demand.source}"
    out = [("deployment.yaml", deployment(plan, name, image),
            [src, "resource requests for one replica" + (
                "" if plan.workload.host else "; no host samples in the input: add cpu and "
                "memory requests yourself (a run directory from rightsize run has them)")])]
    if plan.hpa_target_pct is not None:
        out.append(("hpa.yaml", hpa(plan, name),
                    [src, "apply hpa.yaml or keda-scaledobject.yaml, not both"]))
    out.append(("keda-scaledobject.yaml", scaled_object(plan, name, query, server),
                [src, "KEDA alternative: scales on the request rate (KEDA makes its own HPA)"]))
    return tuple(Manifest(f, obj, dump(obj, head)) for f, obj, head in out)


def check_name(name: str) -> str | None:
    if len(name) > 63 or not _NAME.match(name):
        return f"{name!r} is not a valid Kubernetes name (lower-case letters, digits, '-', " \
               "at most 63)"
    return None


def check(m: Manifest) -> list[str]:
    """Structural problems of one emitted manifest (the fields this module writes)."""
    o = plain(m.obj)
    problems: list[str] = []
    spec = o.get("spec", {})
    if o["kind"] == "Deployment":
        c = spec["template"]["spec"]["containers"][0]
        if spec["selector"]["matchLabels"] != spec["template"]["metadata"]["labels"]:
            problems.append("selector does not match the pod labels")
        for k, v in c["resources"]["limits"].items():
            if "/" in k and c["resources"]["requests"].get(k) != v:
                problems.append(f"extended resource {k}: limit != request")
    else:
        lo, hi = (("minReplicas", "maxReplicas") if o["kind"] == "HorizontalPodAutoscaler"
                  else ("minReplicaCount", "maxReplicaCount"))
        if not 1 <= spec[lo] <= spec[hi]:
            problems.append(f"{lo} {spec[lo]} must be >= 1 and <= {hi} {spec[hi]}")
    if check_name(o["metadata"]["name"]):
        problems.append(check_name(o["metadata"]["name"]) or "")
    return [f"{m.filename}: {p}" for p in problems]
