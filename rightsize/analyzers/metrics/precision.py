"""Numeric precision each kernel ran at, weighed by time, per kernel group and for the workload.

Input: classified device work (``diagnose``'s kernels with ``name``, ``dur_ns``, ``group``,
``work`` and, where the launching op recorded its input types, ``precision``) and the GPU's
architecture; communication kernels are left out (their dtype is data, not math). Output: :class:`PrecisionMix`. Evidence, best first:

1. the kernel name: ``e4m3``/``e5m2``/``fp8`` -> fp8; ``i8``/``int8``/``imma`` -> int8;
   ``bf16`` -> bf16; ``fp16``/``f16``/``h884``/``h1688``/``h16816``/``hgemm``/``half`` -> fp16;
   ``tf32`` and the FP32-in tensor-op GEMMs (``s1688``/``s16816``/``s884`` are CUTLASS/cuBLAS
   TF32 MMA shapes) -> tf32; ``sgemm``/``f32f32_f32`` -> fp32;
2. the launching op's input dtype (Kineto's ``Input type``); an fp32 op that ran on a
   tensor-core kernel (``xmma``, ``tensorop``, ``gmma``, MFMA) on Ampere or later is TF32
   (cuBLAS only takes that path when TF32 math is allowed);
3. otherwise unknown (``None``): not counted in the workload's mix.

The workload precision is the one with the most compute-bound kernel time (all kernel time when
no kernel is compute-bound). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from rightsize.analyzers.document.sizing import GroupPrecision, PrecisionMix

if TYPE_CHECKING:
    from rightsize.analyzers.sections import SectionInput


@dataclass(frozen=True, slots=True)
class Rule:
    """A kernel-name test: ``pattern`` found anywhere, or each of ``then`` after it in turn
    (``a.*b`` without the regex: ``a.*b`` searched in a name of many ``a`` takes time quadratic
    in the name's length, while the first ``a`` and then a ``b`` after it is one pass).
    Patterns never backtrack (tests/fuzz/test_fuzz_regexes.py)."""

    pattern: re.Pattern[str]
    then: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, pattern: str, *then: str) -> Rule:
        return cls(re.compile(pattern), tuple(re.compile(t) for t in then))

    def search(self, text: str) -> bool:
        found = self.pattern.search(text)
        for part in self.then:
            if found is None:
                return False
            found = part.search(text, found.end())
        return found is not None


# (test over the lower-cased kernel name, precision), first match wins.
NAME_RULES: tuple[tuple[Rule, str], ...] = (
    # rocBLAS/hipBLASLt Tensile GEMMs name their operand type after the index order:
    # Cijk_Alik_Bljk_B_BS_BH... and Cijk_Ailk_Bljk_BBS_BH... are bf16, ..._HHS_BH... fp16
    (Rule.of(r"cijk_a[a-z]+_b[a-z]+_b[a-z]*_"), "bf16"),
    (Rule.of(r"cijk_a[a-z]+_b[a-z]+_h[a-z]*_"), "fp16"),
    (Rule.of(r"e4m3|e5m2|fp8|f8f8"), "fp8"),
    (Rule.of(r"(?:^|[_\W])(?:i8|int8|imma)|i8i8|s8s8"), "int8"),
    (Rule.of(r"bf16|bfloat16"), "bf16"),
    (Rule.of(r"fp16|f16|h884|h1688|h16816|hgemm|half|(?:^|_)h_|hcudnn"), "fp16"),
    (Rule.of(r"tf32|s1688|s16816|s884|tensorop_s\d"), "tf32"),
    # legacy cuDNN (Volta/Turing): scudnn_* is single precision, and its templated engines
    # name their element type (dgrad_engine<float, ...>, bn_bw_1C11_kernel_new<float, ...>)
    (Rule.of(r"sgemm|f32f32_f32|fp32|ffma|scudnn"), "fp32"),
    (Rule.of(r"cudnn", r"<float[,>]"), "fp32"),
)
# Matrix-unit kernel names: an fp32 op on one of these ran as TF32 (Ampere and later).
TENSOR_CORE_NAMES = (Rule.of(r"xmma|tensorop|gmma|wgmma|mfma|nvjet"),
                     Rule.of(r"cijk_", r"_mfma"))
# Architectures whose tensor cores have no TF32 (their fp32 GEMMs run on CUDA cores).
NO_TF32_ARCHITECTURES = ("Volta", "Turing", "Pascal")


def name_precision(name: str | None) -> str | None:
    """The precision a kernel name states, or None (also for a kernel without a name)."""
    low = (name or "").lower()
    return next((p for rule, p in NAME_RULES if rule.search(low)), None)


def kernel_precision(name: str | None, op_precision: str | None,
                     architecture: str | None = None) -> str | None:
    """One kernel's precision from its name, else its op's dtype (fp32 on tensor cores: tf32)."""
    by_name = name_precision(name)
    if by_name is not None:
        return by_name
    low = (name or "").lower()
    if (op_precision == "fp32" and any(rule.search(low) for rule in TENSOR_CORE_NAMES)
            and not (architecture or "").startswith(NO_TF32_ARCHITECTURES)):
        return "tf32"
    return op_precision


def _codes(column: str) -> pl.Expr:
    """32-bit ids of a string column's values (a categorical's codes; null stays null)."""
    return pl.col(column).cast(pl.Categorical).to_physical()


def with_precision(work: pl.DataFrame, architecture: str | None = None) -> pl.DataFrame:
    """``work`` with a ``kernel_precision`` column (computed once per name and op dtype)."""
    op = work["precision"] if "precision" in work.columns else pl.Series(
        [None] * work.height, dtype=pl.String)
    # Keyed by ids: ``unique`` and the join hash integers. Two string key columns are
    # row-encoded with their text (1.5 GiB for 2.4 M kernels of 300-byte names).
    w = work.with_columns(op_precision=op)
    w = w.with_columns(_name=_codes("name"), _op=_codes("op_precision"))
    keys = w.select("_name", "_op", "name", "op_precision").unique(["_name", "_op"])
    values = [kernel_precision(n, p, architecture)
              for n, p in keys.select("name", "op_precision").iter_rows()]
    keys = keys.select("_name", "_op", kernel_precision=pl.Series(values, dtype=pl.String))
    return w.join(keys, on=["_name", "_op"], how="left", nulls_equal=True,
                  maintain_order="left").drop("op_precision", "_name", "_op")


def precision_mix(work: pl.DataFrame, architecture: str | None = None,
                  top_groups: int = 20) -> PrecisionMix:
    """Time-weighted precision of ``work`` (kernels with ``name``, ``dur_ns``; optional
    ``group``, ``work``, ``precision``)."""
    if work.height == 0:
        return PrecisionMix(None, {}, 0.0, ())
    # Filters and joins copy every column they keep: keep only the ones read here.
    work = work.select(c for c in ("name", "dur_ns", "group", "work", "precision")
                       if c in work.columns)
    if "work" in work.columns:  # collectives move data; their dtype is not math precision
        work = work.filter(pl.col("work").fill_null("") != "communication")
    if work.height == 0:
        return PrecisionMix(None, {}, 0.0, ())
    w = with_precision(work, architecture)
    if "group" not in w.columns:
        w = w.with_columns(group=pl.col("name"))
    total = int(w["dur_ns"].sum())
    known = w.filter(pl.col("kernel_precision").is_not_null())
    by_p = (known.group_by("kernel_precision").agg(pl.col("dur_ns").sum())
            .sort(["dur_ns", "kernel_precision"], descending=[True, False]))
    known_ns = int(known["dur_ns"].sum())
    pct = {p: 100.0 * ns / known_ns for p, ns in by_p.iter_rows()} if known_ns else {}
    compute = known.filter(pl.col("work") == "compute") if "work" in known.columns else known
    pool = compute if compute.height else known
    top = (pool.group_by("kernel_precision").agg(pl.col("dur_ns").sum())
           .sort(["dur_ns", "kernel_precision"], descending=[True, False]))
    groups = (w.group_by("group", "kernel_precision").agg(pl.col("dur_ns").sum())
              .sort(["dur_ns", "group"], descending=[True, False]).head(top_groups))
    return PrecisionMix(
        workload=top["kernel_precision"][0] if top.height else None,
        time_pct=pct,
        unknown_pct=100.0 * (total - known_ns) / total if total else 0.0,
        groups=tuple(GroupPrecision(g, p, ns / 1e6) for g, p, ns in groups.iter_rows()),
    )


def workload_precision(work: pl.DataFrame | None, match: Any = None) -> PrecisionMix | None:
    """The document's ``precision`` object for a rank's classified work (``None``: no kernels);
    ``match`` is the rank's catalog DeviceMatch (its architecture decides TF32)."""
    if work is None or work.height == 0 or "dur_ns" not in work.columns:
        return None
    gpu = getattr(match, "gpu", None)
    return precision_mix(work, getattr(gpu, "architecture", None))


def section(rank: SectionInput) -> PrecisionMix | None:
    """Section ``precision`` (needs ``verdict``, ``device_match``)."""
    return workload_precision(rank.work, rank["device_match"])
