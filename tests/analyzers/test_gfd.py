"""GPU feature discovery's product labels for the catalog's GPUs (catalog/gfd.py): the NVML name
with spaces as '-', as k8s-device-plugin's productLabel writes it."""

from __future__ import annotations

import pytest

from rightsize.catalog import gfd, load_catalog
from rightsize.reports.placement import gpu_nodes
from rightsize.reports.yaml_emit import plain


@pytest.mark.parametrize(("gpu", "products"), [
    ("H100 SXM", ("NVIDIA-H100-80GB-HBM3",)),  # the NVML name of samples/runs/*-h100
    ("H200 SXM", ("NVIDIA-H200",)),  # samples/whatif/*-h200
    ("A100 40GB SXM", ("NVIDIA-A100-SXM4-40GB",)),
    ("T4", ("Tesla-T4",)),
    ("RTX 6000 Ada", ("NVIDIA-RTX-6000-Ada-Generation",)),
    ("V100 32GB SXM2", ("Tesla-V100-SXM2-32GB", "Tesla-V100-DGXS-32GB")),
    ("MI300X", ()),  # AMD: GFD labels no AMD GPU
])
def test_products(gpu, products):
    assert gfd.products(gpu) == products


def test_every_nvidia_gpu_of_the_catalog_has_a_label():
    nvidia = [g.name for g in load_catalog().gpus if g.vendor.upper() == "NVIDIA"]
    assert [g for g in nvidia if not gfd.products(g)] == []


def test_mig_and_time_share_labels():
    assert gfd.label_for("A100 40GB SXM", "mig", "1g.5gb") == (
        "nvidia.com/mig-1g.5gb.product", ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",))
    assert gfd.label_for("L4", "time-slicing") == ("nvidia.com/gpu.product",
                                                   ("NVIDIA-L4-SHARED",))


def test_one_name_is_a_selector_two_are_an_affinity():
    assert plain(gpu_nodes("L4", "sized")) == {"nodeSelector": {"nvidia.com/gpu.product":
                                                                "NVIDIA-L4"}}
    term = plain(gpu_nodes("V100 32GB SXM2", "sized"))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term == {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                          "values": ["Tesla-V100-SXM2-32GB",
                                                     "Tesla-V100-DGXS-32GB"]}]}
    assert gpu_nodes("MI300X", "sized") == {}
