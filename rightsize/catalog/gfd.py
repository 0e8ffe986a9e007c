"""NVIDIA GPU feature discovery's product labels for the catalog's GPUs: which nodes a pod that
was sized for a GPU may land on.

GFD labels each GPU node ``nvidia.com/gpu.product=<NVML device name, spaces as '-'>``
(``NVIDIA/k8s-device-plugin``, ``internal/lm/resource.go``: ``productLabel``); a MIG device's
label sits on its resource (``nvidia.com/mig-1g.10gb.product``, the mixed strategy) with
``-MIG-<profile>`` appended, and a time-sliced GPU's gets ``-SHARED`` unless the shared resource
is renamed. The NVML names per catalog GPU are package data (``data/gfd_products.csv``, its
sources in ``data/README.md``). Pure; loaded with ``importlib.resources``.
"""

from __future__ import annotations

import csv
import io
from functools import cache
from importlib import resources

LABEL = "nvidia.com/gpu.product"
SOURCE = ("GPU feature discovery's product label (NVML name, spaces as '-'): check with "
          "kubectl get nodes -L nvidia.com/gpu.product")


@cache
def _names() -> dict[str, tuple[str, ...]]:
    text = (resources.files("rightsize.catalog") / "data" / "gfd_products.csv").read_text("utf-8")
    out: dict[str, tuple[str, ...]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        out[row["gpu"]] = (*out.get(row["gpu"], ()), row["nvml_name"])
    return out


def products(gpu: str) -> tuple[str, ...]:
    """The ``nvidia.com/gpu.product`` values a node with this catalog GPU carries (several
    where NVML names the part more than one way); empty for a GPU GFD does not label (AMD)
    or one the table lacks."""
    return tuple(name.replace(" ", "-") for name in _names().get(gpu, ()))


def label_for(gpu: str, kind: str = "whole-gpu", profile: str | None = None,
              ) -> tuple[str, tuple[str, ...]]:
    """The node label key and its values for a pod on ``gpu``: a whole GPU, a MIG slice
    (``kind`` "mig", its ``profile``: the mixed strategy's per-profile label) or a time
    share ("time-slicing": the shared GPU's ``-SHARED`` name)."""
    names = products(gpu)
    if kind == "mig" and profile:
        return f"nvidia.com/mig-{profile}.product", tuple(f"{n}-MIG-{profile}" for n in names)
    if kind == "time-slicing":
        return LABEL, tuple(f"{n}-SHARED" for n in names)
    return LABEL, names
