"""Which workload each series belongs to: namespace + owner, or the ``--group-by`` labels.

The owner is the pod's name without the suffixes its controller added (Kubernetes draws them
from the alphabet ``bcdfghjklmnpqrstvwxz2456789``, no vowels, so real words rarely match):

* a Deployment's pod ``name-<pod-template-hash, 6-10>-<5>`` -> ``name``;
* a Job, DaemonSet or bare ReplicaSet's pod ``name-<5>`` -> ``name``;
* a CronJob's ``name-<schedule minute, 8+ digits>-<5>`` -> ``name``;
* a StatefulSet's ``name-<ordinal>`` -> ``name``.

A pod key without a dash (the Alibaba files' hashed container IP) is its own workload, and so
is a metrics log read from a file (label ``file``: ``gpu-2025-02-11-00-47-08.csv`` is not a
StatefulSet's pod ``-08``). Each
series also gets a replica (its pod) and a GPU (pod + UUID, else pod + device index, + the MIG
instance). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_K8S = "[bcdfghjklmnpqrstvwxz2456789]"
_SUFFIXES = (
    (re.compile(rf"^(.+)-\d{{8,}}-{_K8S}{{5}}$"), "CronJob"),  # CronJob -> Job -> pod
    (re.compile(rf"^(.+)-{_K8S}{{6,10}}-{_K8S}{{5}}$"), "Deployment"),  # -> ReplicaSet -> pod
    (re.compile(rf"^(.+)-{_K8S}{{5}}$"), "Job"),  # or a DaemonSet, a bare ReplicaSet
    (re.compile(r"^(.+)-\d+$"), "StatefulSet"),  # ordinal
)


def owner_kind(pod: str) -> tuple[str, str | None]:
    """The controller's name behind a pod name and the kind its suffix suggests (the pod name
    itself and None when no suffix matches)."""
    for pattern, kind in _SUFFIXES:
        m = pattern.match(pod)
        if m:
            return m.group(1), kind
    return pod, None


def owner(pod: str) -> str:
    return owner_kind(pod)[0]


@dataclass(frozen=True, slots=True)
class Assignment:
    """Per series: its workload, replica and GPU (indices), and the workloads' labels."""

    workload: tuple[int, ...]
    replica: tuple[int, ...]
    gpu: tuple[int, ...]
    workloads: tuple[Mapping[str, str], ...]  # labels naming each workload
    names: tuple[str, ...]  # "namespace/owner" or the group-by values joined by "/"


def workload_labels(labels: Mapping[str, str], group_by: Sequence[str] | None) -> dict[str, str]:
    if group_by:
        return {k: labels.get(k, "") for k in group_by}
    out = {}
    if labels.get("namespace"):
        out["namespace"] = labels["namespace"]
    if labels.get("file"):  # a log file is one workload named by it: no pod suffixes to drop
        out["owner"] = labels["file"]
        return out
    out["owner"] = owner(labels.get("pod", "")) if labels.get("pod") else ""
    return out


def assign(series_labels: Sequence[Mapping[str, str]],
           group_by: Sequence[str] | None = None) -> Assignment:
    """Group series into workloads (see the module docstring)."""
    wids: dict[tuple[tuple[str, str], ...], int] = {}
    rids: dict[tuple[int, str], int] = {}
    gids: dict[tuple[int, str, str], int] = {}
    workload: list[int] = []
    replica: list[int] = []
    gpu: list[int] = []
    wl: list[dict[str, str]] = []
    for labels in series_labels:
        key_labels = workload_labels(labels, group_by)
        k = tuple(key_labels.items())
        w = wids.setdefault(k, len(wids))
        if w == len(wl):
            wl.append(key_labels)
        pod = labels.get("pod", "")
        r = rids.setdefault((w, pod), len(rids))
        device = labels.get("uuid") or labels.get("gpu", "")
        g = gids.setdefault((r, device, labels.get("GPU_I_ID", "")), len(gids))
        workload.append(w)
        replica.append(r)
        gpu.append(g)
    names = tuple("/".join(v for v in w.values() if v) or "(unlabelled)" for w in wl)
    return Assignment(tuple(workload), tuple(replica), tuple(gpu), tuple(wl), names)
