"""GPU catalog: package data, device-name matching, prices, user overrides, `rightsize gpus`."""

from __future__ import annotations

import csv
import io
import json
from importlib import resources

import pytest

from rightsize.catalog import (
    CatalogError,
    CatalogFile,
    Precision,
    Price,
    load_catalog,
    parse_catalog_text,
)
from rightsize.catalog.catalog import UNDATED
from tests.conftest import cli


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_package_data_loads_with_sources(catalog):
    assert len(catalog.gpus) == 28
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
    assert names == ["H200 SXM", "H200 NVL", "B200", "GB200 (per GPU)", "MI300X", "MI325X",
                     "MI355X"]


def test_cli_gpus_catalog_env_and_bad_file(tmp_path):
    import os
    mine = tmp_path / "prices.csv"
    mine.write_text("gpu,provider,instance_type,gpus_per_instance,usd_per_gpu_hour,date_seen\n"
                    "L4,onprem,rack1,1,0.10,2026-06-01\n")
    out = _cli("gpus", "--provider", "onprem", env={**os.environ, "RIGHTSIZE_CATALOG": str(mine)})
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("L4 "))
    assert row.split()[-3:] == ["0.100", "onprem", "2026-06-01"]  # dated: no "?" footnote
    assert "?: no source gives the date" not in out.stdout
    bad = _cli("gpus", "--catalog", str(tmp_path / "missing.csv"))
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "cannot read the catalog file" in bad.stderr


# (gpu, provider, instance) -> (USD per GPU-hour, date_seen): every shipped price a source dates
# (data/README.md says which source); the other 29 are "undated".
DATED = {
    ("A10G", "AWS", "g5.xlarge"): (1.006, "2026-06-17"),
    ("A100 40GB SXM", "AWS", "p4d.24xlarge"): (2.7447, "2026-11-09"),
    ("A100 80GB SXM", "AWS", "p4de.24xlarge"): (3.4309, "2026-11-09"),
    ("H100 SXM", "AWS", "p5.48xlarge"): (6.88, "2026-11-09"),
    ("H200 SXM", "AWS", "p5en.48xlarge"): (7.912, "2026-08-06"),
    ("H100 SXM", "AWS", "p5.48xlarge (secondary, post-cut)"): (3.9, "2026-03"),
    ("H100 SXM", "GCP", "a3-highgpu (secondary)"): (3.0, "2026-03"),
    ("H100 NVL", "Azure", "Standard_NC40ads_H100_v5"): (6.98, "2026-11-09"),
    ("L4", "GCP", "g2-standard-4 (secondary)"): (0.75, "2026-03"),
    ("L40S", "RunPod", "1x_L40S_SECURE"): (0.86, "2025-09-22"),
    ("A100 80GB PCIe", "RunPod", "1x_A100-80GB_SECURE"): (1.64, "2025-09-22"),
}


def test_prices_carry_the_date_a_source_shows_them(catalog):
    dated = {(p.gpu, p.provider, p.instance_type): (p.usd_per_gpu_hour, p.date_seen)
             for p in catalog.prices if p.dated}
    assert dated == DATED
    undated = [p for p in catalog.prices if not p.dated]
    assert len(undated) == 29 and {p.date_seen for p in undated} == {UNDATED}
    assert {p.provider for p in undated} == {"AWS", "Lambda", "RunPod", "article"}
    assert all(p.date_seen_detail for p in catalog.prices)  # the source of a date, or why none
    h200 = next(p for p in catalog.prices if p.instance_type == "p5en.48xlarge")
    assert "dstack pull request #4110" in h200.date_seen_detail
    # the price per GPU is the instance's price over its GPUs, on every row
    rows = csv.DictReader(io.StringIO(
        (resources.files("rightsize.catalog") / "data" / "prices.csv").read_text("utf-8")))
    for r in rows:
        per_gpu = float(r["usd_per_hour_on_demand"]) / int(r["gpus_per_instance"])
        assert abs(per_gpu - float(r["usd_per_gpu_hour"])) < 5e-5, r["instance_type"]


@pytest.mark.parametrize(("seen", "dated"), [
    ("2026", True), ("2026-03", True), ("2026-05-01", True), (" 2026-05-01 ", True),
    ("undated", False), ("", False), ("Q3 2026", False), ("2026-03 (page date)", False),
    ("2026/05/01", False)])
def test_a_date_seen_is_a_date_or_a_note(seen, dated):
    assert Price("L4", "me", "x", 1, 1.0, date_seen=seen).dated is dated


def test_cli_gpus_table_dates_each_price_and_explains_undated_once():
    out = _cli("gpus")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == ("GPU              GiB GB/s fp32  fp16  bf16   fp8  TDP $/GPU-h from    "
                        "seen")
    rows = {line[:15].strip(): line for line in lines[2:27]}
    assert rows["T4"] == ("T4                16  320  8.1    65     -     -   70   0.526 AWS     "
                          "?")
    assert rows["A10G"].endswith("1.006 AWS     2026-06-17")
    assert rows["H100 NVL"].endswith("6.980 Azure   2026-11-09")
    assert rows["L40S"].endswith("0.860 RunPod  2025-09-22")
    assert rows["B200"].endswith("1000       -")  # no price: no provider, no date
    assert sum(line.endswith(" ?") for line in lines) == 12
    assert "\n".join(lines).count("?: no source gives the date of 12 of these prices") == 1
    assert sum("undated" in line for line in lines) == 0  # said once, by the footnote
    aws = _cli("gpus", "--provider", "AWS").stdout.splitlines()
    assert next(r for r in aws if r.startswith("H200 SXM")).endswith("7.912 AWS     2026-08-06")
