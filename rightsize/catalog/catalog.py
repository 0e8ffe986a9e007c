"""GPU catalog: specs, dated prices and device-name matching.

Inputs: the package data under ``rightsize/analyzers/data`` (``gpus.csv``, ``prices.csv``,
``aliases.csv``; see its README for provenance), plus optional user catalog texts (CSV or JSON)
that add or override GPUs and prices, e.g. a negotiated price. Reading a user's file is the
caller's job (:func:`rightsize.cli.gpus.load_catalog_for_cli`); this module only parses text.

Outputs: a frozen :class:`Catalog` with :meth:`Catalog.match` (a device name as CUDA, NVML, nsys
or ROCm spell it, disambiguated by memory size and SM count; unknown devices are reported, never
guessed) and :meth:`Catalog.price` (the price used for cost figures, with its provider and date).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from importlib import resources
from typing import Any, TypeVar

from rightsize.errors import RightsizeError
from rightsize.node import Node, internal, node
from rightsize.vocab import Precision

GIB = 1 << 30


class CatalogError(RightsizeError):
    """A catalog file or a GPU name the user gave cannot be used."""




# Volta and Turing tensor cores have no BF16 (and no TF32): bf16 math runs at the FP32 rate.
# Source: the T4 and V100 rows of gpus.csv ("no TF32/BF16/FP8", "FP16 only").
NO_BF16_ARCHITECTURES: tuple[str, ...] = ("Volta", "Turing")

# A device's reported memory vs the catalog's GiB figure: ECC and driver reservations take up to
# ~8% (T4 reports 14.75 GiB of 16, L4 22.5 of 24); above 3% more it is a different SKU.
MEMORY_MATCH_LOW, MEMORY_MATCH_HIGH = 0.88, 1.03


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU SKU; throughput is dense (no 2:4 sparsity). Empty cells are ``None``."""

    name: str
    vendor: str
    architecture: str
    memory_gib: float  # the datasheet's "GB", which is GiB (CSV column memory_gb; data/README.md)
    memory_bandwidth_gbs: float
    fp32_tflops: float | None = None
    tf32_tflops_dense: float | None = None
    fp16_bf16_tflops_dense: float | None = None
    fp8_tflops_dense: float | None = None
    int8_tops_dense: float | None = None
    sm_count: int | None = None
    l2_mb: float | None = None
    host_link: str = ""
    host_link_gbs_per_direction: float | None = None
    nvlink_gbs_total: float | None = None
    tdp_w: float | None = None
    mig_max_instances: int | None = None
    gpus_per_node: int | None = None  # GPUs one server/tray holds (None: not fixed by the part)
    year: int | None = None
    form_factor: str = ""
    consumer: bool = False  # a gaming card: left out of recommendations unless asked for
    source: str = ""
    origin: str = "package"  # "package" or the user file it came from

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)

    def supports(self, precision: Precision | str) -> bool:
        """Whether the hardware runs ``precision`` at its own rate, not by falling back to
        another (bf16 on a V100 runs at the FP32 rate: no; TF32 on an MI250X: no)."""
        value, used = self.tflops(precision)
        return value is not None and used == Precision(precision)

    @property
    def link_name(self) -> str:
        """The GPU-to-GPU link the catalog gives it ("NVLink", AMD's "Infinity Fabric"), or
        "" when it has none (PCIe only)."""
        if not self.nvlink_gbs_total:
            return ""
        return "Infinity Fabric" if self.vendor.upper() == "AMD" else "NVLink"

    @property
    def has_mig(self) -> bool:
        """Whether it partitions into isolated instances (NVIDIA MIG, AMD compute partitions)."""
        return bool(self.mig_max_instances)

    def tflops(self, precision: Precision | str) -> tuple[float | None, Precision]:
        """Dense peak throughput at ``precision`` and the precision the hardware really uses.

        A precision the GPU lacks falls back to the next one it runs (fp8 on an A100 runs as
        bf16; bf16 on a V100 runs at the FP32 rate).
        """
        p = Precision(precision)
        no_bf16 = self.architecture.startswith(NO_BF16_ARCHITECTURES)
        half = self.fp16_bf16_tflops_dense
        chain: dict[Precision, list[tuple[float | None, Precision]]] = {
            Precision.FP32: [(self.fp32_tflops, Precision.FP32)],
            Precision.TF32: [(self.tf32_tflops_dense, Precision.TF32),
                             (self.fp32_tflops, Precision.FP32)],
            Precision.BF16: [(None if no_bf16 else half, Precision.BF16),
                             (self.fp32_tflops, Precision.FP32)],
            Precision.FP16: [(half, Precision.FP16), (self.fp32_tflops, Precision.FP32)],
            Precision.FP8: [(self.fp8_tflops_dense, Precision.FP8), (half, Precision.FP16)],
            Precision.INT8: [(self.int8_tops_dense, Precision.INT8), (half, Precision.FP16)],
            # int4 weight-only quantization dequantizes and multiplies in 16-bit.
            Precision.INT4: [(half, Precision.FP16), (self.fp32_tflops, Precision.FP32)],
        }
        for value, used in chain[p]:
            if value:
                return value, used
        return None, p


# A date_seen that is a date: 2026, 2026-03 or 2026-03-14 (anything else is a note, e.g. UNDATED).
DATE_SEEN = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")
# "80GB" in a device name: from the first digit of a number on, no backtracking into it
_GB = re.compile(r"(?<!\d)(\d++)\s*+gb")
UNDATED = "undated"  # date_seen of a shipped price no source dates; date_seen_detail says why


@dataclass(frozen=True, slots=True)
class Price:
    """One on-demand price and when it was seen; ``usd_per_gpu_hour`` = instance price / GPUs
    per instance. ``date_seen`` is the date a source shows this price (the shipped rows: ISO,
    or :data:`UNDATED`); ``date_seen_detail`` names that source or why there is none."""

    gpu: str
    provider: str
    instance_type: str
    gpus_per_instance: int
    usd_per_gpu_hour: float
    region: str = ""
    date_seen: str = ""
    source: str = ""
    origin: str = "package"
    date_seen_detail: str = ""

    @property
    def dated(self) -> bool:
        """Whether ``date_seen`` is a date (not a note such as ``undated``)."""
        return DATE_SEEN.fullmatch(self.date_seen.strip()) is not None


@dataclass(frozen=True, slots=True)
class Alias:
    """A regular expression over normalized device names that points at one catalog GPU."""

    gpu: str
    pattern: str
    reported_memory_gb: float | None = None
    reported_sm_count: int | None = None
    note: str = ""


@node
class DeviceMatch(Node):
    """A device as a trace spells it, and the catalog GPU it is (``None``: unknown, see note):
    the document's ``diagnosis.device_match``."""

    reported: str
    catalog: str | None  # the catalog GPU's name
    note: str
    gpu: Gpu | None = internal(default=None)  # that GPU's specs (not in the document)


@dataclass(frozen=True, slots=True)
class CatalogFile:
    """GPU and price rows parsed from one user catalog file (raw strings, validated on merge)."""

    origin: str
    gpus: tuple[Mapping[str, str], ...] = ()
    prices: tuple[Mapping[str, str], ...] = ()


# CSV column -> Gpu field where the field name states a unit the column name does not: the
# column keeps its name so existing user catalogs still load.
CSV_COLUMNS: dict[str, str] = {"memory_gb": "memory_gib"}

_T = TypeVar("_T", Gpu, Price)  # the row types _build makes

_GPU_FIELDS = {f.name: f for f in fields(Gpu)}
_PRICE_FIELDS = {f.name: f for f in fields(Price)}


def _convert(value: str | None, kind: object, where: str) -> object:
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    kinds = str(kind)
    try:
        if kinds.startswith(("int", "float")) and not math.isfinite(float(text)):
            raise ValueError(text)  # NaN/Infinity: never a number in strict JSON output
        if kinds.startswith("bool"):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise CatalogError(f"{where}: {text!r} is not true or false")
            return text.lower() in ("true", "1", "yes")
        if kinds.startswith("int"):
            return int(float(text))
        if kinds.startswith("float"):
            return float(text)
    except ValueError:
        raise CatalogError(f"{where}: {text[:40]!r} is not a finite number") from None
    return text


def _build(cls: type[_T], row: Mapping[str, str], origin: str, where: str,
           base: _T | None = None) -> _T:
    spec = _GPU_FIELDS if cls is Gpu else _PRICE_FIELDS
    values: dict[str, Any] = {}  # cells converted to each field's type by _convert
    for column, raw in row.items():
        key = CSV_COLUMNS.get(column, column) if cls is Gpu else column
        if key in spec and key != "origin":
            converted = _convert(raw, spec[key].type, f"{where}, column {key}")
            if converted is not None:
                values[key] = converted
    values["origin"] = origin
    if base is not None:
        return replace(base, **values)
    try:
        return cls(**values)
    except TypeError:
        need = [f.name for f in fields(cls) if f.default is MISSING]
        header = {f: c for c, f in CSV_COLUMNS.items()}
        missing = [header.get(n, n) for n in need if n not in values]
        raise CatalogError(f"{where}: missing {', '.join(missing)}") from None


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def parse_catalog_text(text: str, origin: str) -> CatalogFile:
    """Parse a user catalog: a CSV of GPUs (has ``memory_gb``) or of prices (has
    ``usd_per_gpu_hour``), or JSON ``{"gpus": [...], "prices": [...]}`` with the same keys."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CatalogError(f"{origin}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, dict) or not set(data) & {"gpus", "prices"}:
            raise CatalogError(f"{origin}: JSON catalog needs a 'gpus' or 'prices' list")
        gpus, prices = data.get("gpus", []), data.get("prices", [])
        if not isinstance(gpus, list) or not isinstance(prices, list):
            raise CatalogError(f"{origin}: 'gpus' and 'prices' must be lists of objects")
        as_str = [{k: ("" if v is None else str(v)) for k, v in r.items()} for r in gpus + prices
                  if isinstance(r, dict)]
        return CatalogFile(origin, tuple(as_str[: len(gpus)]), tuple(as_str[len(gpus):]))
    rows = _rows(text)
    header = {c.strip() for c in next(csv.reader(io.StringIO(text)), [])}
    if "usd_per_gpu_hour" in header and "gpu" in header:
        return CatalogFile(origin, prices=tuple(rows))
    if "name" in header and "usd_per_gpu_hour" not in header:
        return CatalogFile(origin, gpus=tuple(rows))
    raise CatalogError(
        f"{origin}: a catalog CSV needs a 'name' column (GPUs) or 'gpu' and 'usd_per_gpu_hour'"
        " columns (prices)")


@functools.lru_cache(maxsize=4096)
def _normalize(name: str) -> str:
    text = re.sub(r"\s+", " ", name.strip().lower())
    text = re.sub(r"^(nvidia |tesla |geforce |amd instinct |amd )+", "", text)
    text = re.sub(r"^(tesla |geforce )", "", text)
    return re.sub(r" vf$", "", text)


@dataclass(frozen=True, slots=True)
class Catalog:
    """GPUs, prices and name aliases; build with :func:`load_catalog`."""

    gpus: tuple[Gpu, ...]
    prices: tuple[Price, ...]
    aliases: tuple[Alias, ...]
    origins: tuple[str, ...] = ("package",)

    def gpu(self, name: str) -> Gpu:
        """The GPU called ``name`` (exact catalog name, case-insensitive)."""
        want = name.strip().lower()
        for gpu in self.gpus:
            if gpu.name.lower() == want:
                return gpu
        known = ", ".join(g.name for g in self.gpus)
        raise CatalogError(f"no GPU called {name!r} in the catalog (known: {known})")

    def prices_for(self, gpu: str, provider: str | None = None) -> tuple[Price, ...]:
        rows = [p for p in self.prices if p.gpu.lower() == gpu.lower()]
        if provider:
            rows = [p for p in rows if p.provider.lower() == provider.lower()]
        return tuple(sorted(rows, key=lambda p: (p.usd_per_gpu_hour, p.provider)))

    def price(self, gpu: str, provider: str | None = None) -> Price | None:
        """The price cost figures use: the cheapest of the user's own rows for this GPU when
        there are any (a negotiated price wins), else the cheapest shipped row."""
        rows = self.prices_for(gpu, provider)
        own = [p for p in rows if p.origin != "package"]
        best = own or list(rows)
        return best[0] if best else None

    def match(self, name: str, memory_bytes: int | None = None,
              sm_count: int | None = None) -> DeviceMatch:
        """Which catalog GPU a device is, from its name, memory size and SM (CU) count."""
        norm = _normalize(name)
        cands: list[tuple[Gpu, Alias | None]] = []
        for alias in self.aliases:
            if re.search(alias.pattern, norm):
                gpu = next((g for g in self.gpus if g.name == alias.gpu), None)
                if gpu is not None:
                    cands.append((gpu, alias))
        cands += [(g, None) for g in self.gpus
                  if _normalize(g.name) == norm and all(c[0] is not g for c in cands)]
        if not cands:
            return DeviceMatch(name, None, f"{name!r} is not in the GPU catalog; add it with"
                               " --catalog (a CSV with the columns of gpus.csv)")
        mem_gib = memory_bytes / GIB if memory_bytes else None
        if mem_gib is None:  # "A100-SXM4-80GB", "H100 80GB HBM3": the name says the size
            hint = _GB.search(norm)
            mem_gib = float(hint.group(1)) * 0.99 if hint else None
        if mem_gib is not None:
            def mem_ok(c: tuple[Gpu, Alias | None]) -> bool:
                want = (c[1].reported_memory_gb if c[1] and c[1].reported_memory_gb
                        else c[0].memory_gib)
                return MEMORY_MATCH_LOW <= mem_gib / want <= MEMORY_MATCH_HIGH
            sized = [c for c in cands if mem_ok(c)]
            if not sized:
                have = ", ".join(sorted({c[0].name for c in cands}))
                return DeviceMatch(name, None, f"{name!r} with {mem_gib:.1f} GiB matches no"
                                   f" catalog entry by memory (name suggests {have})")
            cands = sized

        def sm_of(c: tuple[Gpu, Alias | None]) -> int | None:
            return c[1].reported_sm_count if c[1] and c[1].reported_sm_count else c[0].sm_count

        if len(cands) > 1 and sm_count:
            by_sm = [c for c in cands if sm_of(c) == sm_count]
            cands = by_sm or cands
        if len({c[0].name for c in cands}) > 1:
            names = ", ".join(sorted({c[0].name for c in cands}))
            return DeviceMatch(name, None, f"{name!r} is ambiguous ({names}); give the memory"
                               " size or SM count")
        gpu, _ = cands[0]
        note = f"matched {name!r} to {gpu.name}"
        if sm_count and sm_of(cands[0]) and sm_of(cands[0]) != sm_count:
            note += f" (reports {sm_count} SMs, catalog says {sm_of(cands[0])})"
        return DeviceMatch(name, gpu.name, note, gpu)

    def select(self, min_memory_gb: float | None = None,
               provider: str | None = None) -> tuple[Gpu, ...]:
        """GPUs with at least ``min_memory_gb`` and, when given, a price from ``provider``."""
        out = [g for g in self.gpus if min_memory_gb is None or g.memory_gib >= min_memory_gb]
        if provider:
            out = [g for g in out if self.prices_for(g.name, provider)]
        return tuple(out)


def _read_data(name: str) -> str:
    return (resources.files("rightsize.catalog") / "data" / name).read_text("utf-8")


def _merge_gpus(base: list[Gpu], rows: Iterable[Mapping[str, str]], origin: str) -> list[Gpu]:
    out = list(base)
    for i, row in enumerate(rows, start=2):
        name = (row.get("name") or "").strip()
        if not name:
            raise CatalogError(f"{origin}: GPU row {i} has no name")
        idx = next((j for j, g in enumerate(out) if g.name.lower() == name.lower()), None)
        where = f"{origin}: GPU {name!r}"
        if idx is None:
            out.append(_build(Gpu, row, origin, where))
        else:
            out[idx] = _build(Gpu, row, origin, where, base=out[idx])
    return out


def load_catalog(user_files: Sequence[CatalogFile] = ()) -> Catalog:
    """The shipped catalog, with ``user_files`` applied in order (later files win).

    A user GPU row with a known name overrides the cells it fills; a new name adds a GPU (it
    needs ``vendor``, ``architecture``, ``memory_gb`` and ``memory_bandwidth_gbs``). User price
    rows are added and preferred over shipped prices for their GPU.
    """
    gpus = _merge_gpus([], _rows(_read_data("gpus.csv")), "package")
    prices: list[Price] = [_build(Price, r, "package", f"prices.csv row {i}")
                           for i, r in enumerate(_rows(_read_data("prices.csv")), start=2)]
    aliases = [Alias(r["gpu"], r["pattern"],
                     float(r["reported_memory_gb"]) if r["reported_memory_gb"] else None,
                     int(r["reported_sm_count"]) if r["reported_sm_count"] else None, r["note"])
               for r in _rows(_read_data("aliases.csv"))]
    for f in user_files:
        gpus = _merge_gpus(gpus, f.gpus, f.origin)
        for i, row in enumerate(f.prices, start=2):
            price = _build(Price, row, f.origin, f"{f.origin}: price row {i}")
            if not any(g.name == price.gpu for g in gpus):
                raise CatalogError(f"{f.origin}: price row {i} names GPU "
                                   f"{price.gpu!r}, which is not in the catalog")
            prices.append(price)
        for row in f.gpus:
            if row.get("match"):
                aliases.append(Alias(row["name"].strip(), row["match"]))
    return Catalog(tuple(gpus), tuple(prices), tuple(aliases),
                   ("package", *(f.origin for f in user_files)))
