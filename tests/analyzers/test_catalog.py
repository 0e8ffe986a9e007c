"""GPU catalog: package data, device-name matching, prices, user overrides, `rightsize gpus`."""

from __future__ import annotations

import json

import pytest

from rightsize.catalog import (
    CatalogError,
    CatalogFile,
    Precision,
    load_catalog,
    parse_catalog_text,
)
from tests.conftest import cli


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_package_data_loads_with_sources(catalog):
    assert len(catalog.gpus) == 25
    assert [g.name for g in catalog.gpus if g.consumer] == ["RTX 4090"]
    h100 = catalog.gpu("H100 SXM")
    assert h100.fp16_bf16_tflops_dense == 989.4  # dense, not the 1979 sparse figure
    assert h100.memory_bytes == 80 * 2**30
    assert h100.tdp_w == 700 and h100.sm_count == 132
    assert "datasheet" in h100.source
    assert all(p.date_seen for p in catalog.prices)
    assert {p.gpu for p in catalog.prices} <= {g.name for g in catalog.gpus}


# (name as the device reports it, memory bytes, SM count) -> catalog name; values from the
# deviceProperties / TARGET_INFO_GPU of the shared traces.
MATCHES = [
    ("NVIDIA A100-PCIE-40GB", 42505273344, 108, "A100 40GB PCIe"),
    ("Tesla V100-PCIE-32GB", None, None, "V100 32GB PCIe"),
    ("NVIDIA H100 80GB HBM3", 85018279936, 132, "H100 SXM"),
    ("NVIDIA H100 80GB HBM3", 84942979072, 132, "H100 SXM"),
    ("AMD Instinct MI300X VF", 205571227648, 304, "MI300X"),
    ("NVIDIA A100-PG509-200", 42297524224, 108, "A100 40GB SXM"),
    ("NVIDIA A100-SXM4-80GB", 84990623744, 108, "A100 80GB SXM"),
    ("Tesla V100-SXM2-32GB", 34089730048, 80, "V100 32GB SXM2"),
    ("Tesla V100-DGXS-32GB", 34084028416, 80, "V100 32GB SXM2"),
    ("NVIDIA B200", 191503138816, 148, "B200"),
    ("NVIDIA H200", 150121545728, 132, "H200 SXM"),
    ("Tesla T4", 15843721216, 40, "T4"),
    ("NVIDIA H100 PCIe", 85_000_000_000, 114, "H100 PCIe"),
    ("NVIDIA GeForce RTX 4090", 25_393_692_672, 128, "RTX 4090"),
    ("AMD Instinct MI250X", 68_702_699_520, 110, "MI250X"),
    ("NVIDIA A100-SXM4-80GB", None, None, "A100 80GB SXM"),  # size read from the name
]


@pytest.mark.parametrize(("name", "mem", "sms", "want"), MATCHES)
def test_match_device_names(catalog, name, mem, sms, want):
    match = catalog.match(name, mem, sms)
    assert match.gpu is not None, match.note
    assert match.gpu.name == want


@pytest.mark.parametrize(("name", "mem", "sms", "words"), [
    ("AMD Radeon Graphics", 68702699520, 104, "not in the GPU catalog"),
    ("GeForce GTX 1060 with Max-Q Design", 6442450944, 10, "not in the GPU catalog"),
    ("NVIDIA A100-PCIE-40GB", 24 * 2**30, 108, "matches no catalog entry by memory"),
    ("NVIDIA A100", None, None, "ambiguous"),
])
def test_unknown_devices_are_reported_not_guessed(catalog, name, mem, sms, words):
    match = catalog.match(name, mem, sms)
    assert match.gpu is None
    assert words in match.note


def test_sm_mismatch_is_noted(catalog):
    match = catalog.match("NVIDIA L4", 23_580_639_232, 60)
    assert match.gpu is not None and match.gpu.name == "L4"
    assert "60 SMs, catalog says 58" in match.note


def test_throughput_fallbacks(catalog):
    assert catalog.gpu("A100 80GB SXM").tflops("fp8") == (312, Precision.FP16)
    assert catalog.gpu("V100 32GB SXM2").tflops("bf16") == (15.7, Precision.FP32)
    assert catalog.gpu("T4").tflops("tf32") == (8.1, Precision.FP32)
    assert catalog.gpu("H100 SXM").tflops("tf32") == (494.7, Precision.TF32)
    assert catalog.gpu("L4").tflops("int4") == (121, Precision.FP16)


def test_price_is_cheapest_and_filters_by_provider(catalog):
    assert catalog.price("H100 SXM").usd_per_gpu_hour == 2.99
    aws = catalog.price("H100 SXM", "aws")
    assert (aws.usd_per_gpu_hour, aws.instance_type) == (3.9, "p5.48xlarge (secondary, post-cut)")
    assert catalog.price("MI300X") is None


def test_user_price_wins_even_when_dearer(catalog):
    text = "gpu,provider,instance_type,gpus_per_instance,usd_per_gpu_hour,date_seen\n" \
           "H100 SXM,negotiated,reserved,8,3.5,2026-05-01\n"
    cat = load_catalog([parse_catalog_text(text, "mine.csv")])
    price = cat.price("H100 SXM")
    assert (price.provider, price.usd_per_gpu_hour, price.origin) == ("negotiated", 3.5, "mine.csv")


def test_user_gpu_overrides_cells_and_adds_gpus():
    text = json.dumps({"gpus": [
        {"name": "H100 SXM", "memory_bandwidth_gbs": 3000},
        {"name": "Gaudi 3", "vendor": "Intel", "architecture": "Gaudi", "memory_gb": 128,
         "memory_bandwidth_gbs": 3700, "fp16_bf16_tflops_dense": 1835, "match": "gaudi ?3"},
    ]})
    cat = load_catalog([parse_catalog_text(text, "mine.json")])
    h100 = cat.gpu("H100 SXM")
    assert (h100.memory_bandwidth_gbs, h100.fp16_bf16_tflops_dense) == (3000, 989.4)
    assert cat.match("Intel Gaudi 3", 128 * 2**30).gpu.name == "Gaudi 3"


@pytest.mark.parametrize(("text", "words"), [
    ("{oops", "not valid JSON"),
    ('{"other": 1}', "needs a 'gpus' or 'prices' list"),
    ("a,b\n1,2\n", "needs a 'name' column"),
    ("name,memory_gb\nX1,lots\n", "'lots' is not a finite number"),
    ("name,memory_gb\nX1,16\n", "missing vendor, architecture, memory_bandwidth_gbs"),
])
def test_malformed_user_catalogs_raise_one_line(text, words):
    with pytest.raises(CatalogError, match=words):
        load_catalog([parse_catalog_text(text, "bad")])


def test_price_for_unknown_gpu_is_refused():
    text = "gpu,provider,instance_type,gpus_per_instance,usd_per_gpu_hour\nX9,me,x,1,1\n"
    with pytest.raises(CatalogError, match="'X9', which is not in the catalog"):
        load_catalog([CatalogFile("p.csv", prices=tuple(parse_catalog_text(text, "p").prices))])


def _cli(*args, env=None):
    return cli(*args, env=env)

def test_cli_gpus_json_filters_memory():
    out = _cli("gpus", "--min-memory-gb", "141", "--format", "json")
    assert out.returncode == 0, out.stderr
    names = [g["name"] for g in json.loads(out.stdout)["gpus"]]
    assert names == ["H200 SXM", "H200 NVL", "B200", "GB200 (per GPU)", "MI300X"]


def test_cli_gpus_catalog_env_and_bad_file(tmp_path):
    import os
    mine = tmp_path / "prices.csv"
    mine.write_text("gpu,provider,instance_type,gpus_per_instance,usd_per_gpu_hour,date_seen\n"
                    "L4,onprem,rack1,1,0.10,2026-06-01\n")
    out = _cli("gpus", "--provider", "onprem", env={**os.environ, "RIGHTSIZE_CATALOG": str(mine)})
    assert out.returncode == 0, out.stderr
    assert "0.100" in out.stdout and "onprem rack1, 2026-06-01" in out.stdout
    bad = _cli("gpus", "--catalog", str(tmp_path / "missing.csv"))
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "cannot read the catalog file" in bad.stderr
