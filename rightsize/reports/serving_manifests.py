"""Kubernetes manifests for a serving plan: a Deployment of ``vllm serve`` with the sized GPU's
node selector, and a KEDA ScaledObject on vLLM's own queue metric.

Input: a :class:`~rightsize.analyzers.serving.plan.ServingPlan` with a recommendation. Output:
:class:`~rightsize.reports.plan_manifests.Manifest` objects (file name, object, YAML with
comments saying where each number came from), checked by the same structural check as ``rightsize
plan``'s (and, in the CLI, the Kubernetes OpenAPI schemas when ``kubernetes-validate`` is
installed). Pure: the CLI writes the files.

The ScaledObject scales on ``vllm:num_requests_waiting`` (requests queued for a seat in the
running batch, vLLM's Prometheus gauge, per replica): a newcomer behind ``W`` waiting requests
on a replica admitting ``lam`` requests/s waits about ``W / lam``, so the threshold keeps that
under half the TTFT SLO: ``max(1, floor(lam x TTFT SLO / 2))``. The queue is empty whenever
the replicas keep up, so it cannot say when to scale in: the minimum stays at the replicas the
plan sized for the rate.
"""

from __future__ import annotations

import math
from typing import Any

from rightsize.analyzers.serving.plan import Option, ServingPlan
from rightsize.reports.placement import gpu_nodes
from rightsize.reports.plan_manifests import Manifest
from rightsize.reports.yaml_emit import Note, dump

QUEUE_METRIC = "vllm:num_requests_waiting"
PORT = 8000


def deployment(p: ServingPlan, name: str, image: str, model_id: str) -> dict[str, Any]:
    o = p.recommended
    assert o is not None
    labels = {"app": name}
    per_replica = o.tp * o.pp
    args = ["--model", model_id, *(x for a in p.vllm_args for x in a.split(" ", 1)),
            "--port", str(PORT)]
    gpus = Note(str(per_replica), f"tensor parallel {o.tp} x pipeline {o.pp} on one node")
    container = {
        "name": Note(name, f"the plan: {o.label}"),
        "image": Note(image, "vLLM's OpenAI-compatible server image"),
        "args": args,
        "ports": [{"containerPort": PORT, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT}},
        "resources": {"requests": {"nvidia.com/gpu": gpus},
                      "limits": {"nvidia.com/gpu": Note(str(per_replica),
                                                        "extended resources: limit = request")}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod = {**gpu_nodes(o.gpu, f"the GPU the plan sized ({o.gpu})"),
           "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": Note(o.replicas, f"replicas for {p.rate_per_s:g} req/s at the SLO "
                                              "(simulated)"),
                 "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


def queue_threshold(p: ServingPlan, o: Option) -> int:
    per_replica = p.rate_per_s / o.replicas
    return max(1, math.floor(per_replica * p.ttft_p95_slo_ms / 1000 / 2))


def scaled_object(p: ServingPlan, name: str, server: str, max_replicas: int) -> dict[str, Any]:
    o = p.recommended
    assert o is not None
    threshold = queue_threshold(p, o)
    query = f'sum({QUEUE_METRIC}{{pod=~"{name}-.*"}})'
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"name": name},
            "minReplicaCount": Note(o.replicas, f"the plan's replicas for {p.rate_per_s:g} "
                                    "req/s: an empty queue cannot tell when to scale in"),
            "maxReplicaCount": Note(max(o.replicas, max_replicas), "within --max-gpus"),
            "triggers": [{"type": "prometheus", "metadata": {
                "serverAddress": Note(server, "your Prometheus"),
                "query": Note(query, "requests waiting for a seat, vLLM's gauge, all replicas"),
                "threshold": Note(str(threshold), (
                    f"waiting requests per replica: at {p.rate_per_s / o.replicas:.3g} req/s "
                    f"a replica drains them within half the TTFT SLO "
                    f"({p.ttft_p95_slo_ms:g} ms / 2)"))}}],
        },
    }


def manifests(p: ServingPlan, name: str, image: str, model_id: str, server: str,
              max_gpus: int) -> tuple[Manifest, ...]:
    o = p.recommended
    if o is None:
        return ()
    src = f"rightsize serving plan: {o.label}, {p.load}"
    items = [("deployment.yaml", deployment(p, name, image, model_id),
              [src, "one replica = one vllm serve process on one node"]),
             ("keda-scaledobject.yaml",
              scaled_object(p, name, server, max_gpus // (o.tp * o.pp)),
              [src, f"KEDA scales the Deployment on {QUEUE_METRIC}"])]
    return tuple(Manifest(f, obj, dump(obj, head)) for f, obj, head in items)
