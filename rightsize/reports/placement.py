"""Where a manifest's pod may run: the node selector (or affinity) for the GPU a plan sized, by
GPU feature discovery's product label (:mod:`rightsize.catalog.gfd`), shared by ``plan``,
``serving plan`` and ``fleet metrics --patches``.

Input: a catalog GPU name, and a MIG profile or time share where the pod takes one. Output: the
pod-spec keys to merge (``nodeSelector`` for one product name, a required ``nodeAffinity`` for
several), each value with a comment saying where it comes from; ``{}`` for a GPU GFD does not
label (AMD), said by the caller's comment instead. Pure.
"""

from __future__ import annotations

from typing import Any

from rightsize.catalog import gfd
from rightsize.reports.yaml_emit import Note


def gpu_nodes(gpu: str, why: str, kind: str = "whole-gpu",
              profile: str | None = None) -> dict[str, Any]:
    """``{"nodeSelector": {...}}`` or ``{"affinity": {...}}`` pinning the pod to nodes with
    ``gpu`` (as a MIG ``profile`` or a time share when ``kind`` says so); ``why``: what sized
    it, written beside the label."""
    key, values = gfd.label_for(gpu, kind, profile)
    if not values:
        return {}
    comment = f"{why}; {gfd.SOURCE}"
    if len(values) == 1:
        return {"nodeSelector": {key: Note(values[0], comment)}}
    term = {"matchExpressions": [{"key": Note(key, comment), "operator": "In",
                                  "values": list(values)}]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}}
