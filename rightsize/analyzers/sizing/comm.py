"""Communication time on a GPU and fabric: NCCL's own cost model (``nccl_model``) with
efficiencies fitted on published nccl-tests results and measured NCCL tables.

Inputs: a collective type (``analyzers/job/names``), its nccl-tests size in bytes, and the
:class:`~nccl_model.Span` it crosses (ranks, nodes, the in-node link and the network per GPU;
:func:`span_for` / ``comm_layout.Layout.span`` build it from the catalog). Output: the time of
one call in µs, with the algorithm and protocol NCCL runs it with (:func:`collective_time`).

:class:`CommModel` is the fitted :class:`~nccl_model.Factors` plus, per fabric class, the
leave-one-system-out error a projection carries (its range). The shipped model is
``catalog/data/comm_model.json`` (``benchmarks/fit_comm.py`` fits it); a user's own
(``rightsize comm fit``, read by ``--comm-model FILE``) has the same form and takes its place:
a measured fabric beats any catalog. The stable entry points for other analyses are
:func:`collective_us` (scalar) and :func:`collective_curve` (numpy arrays of sizes). Pure but
for reading a model file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rightsize.analyzers.job import names
from rightsize.analyzers.sizing import nccl_model as nm
from rightsize.analyzers.sizing.comm_layout import Layout, layout_for
from rightsize.analyzers.sizing.model import CommWork
from rightsize.analyzers.sizing.nccl_model import Factors, Span, Timing
from rightsize.catalog import Gpu, Price
from rightsize.errors import InputError

__all__ = ["CommModel", "CommProjection", "Layout", "Span", "Timing", "collective_curve",
           "collective_time", "collective_us", "layout_for", "load_model", "project_calls",
           "read_model", "span_for"]

FORMAT = "rightsize-comm-model"
VERSION = 1
MODELLED = frozenset({*names.BUS_FACTORS, names.BARRIER})
DEFAULT_ERROR_PCT = 50.0  # a class no leave-one-out error covers
MAX_KNOWN_TIMINGS = 8192


@dataclass(frozen=True, slots=True)
class CommModel:
    """Fitted factors and the range each fabric class's projections carry."""

    factors: Factors
    error_by_class: Mapping[str, float] = field(default_factory=dict)  # class -> % (LOO)
    source: str = "shipped"  # "shipped", or the file a user's model was read from
    # Timings already worked out: a rank's sizing asks for the same calls on every candidate
    # (27 candidates x 19 call types x 2 on the 175 MB trace: 1026 asks, ~200 distinct).
    _known: dict[tuple[str, float, Span, bool], Timing | None] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def timing(self, collective: str, size_bytes: float, span: Span,
               nvls_ok: bool = True) -> Timing | None:
        """One call's time, algorithm and protocol (None: a type without a model)."""
        key = (collective, float(size_bytes), span, nvls_ok)
        if key in self._known:
            return self._known[key]
        if len(self._known) >= MAX_KNOWN_TIMINGS:  # a long-lived process: bounded
            self._known.clear()
        t = self._timing(collective, size_bytes, span, nvls_ok)
        self._known[key] = t
        return t

    def _timing(self, collective: str, size_bytes: float, span: Span,
                nvls_ok: bool) -> Timing | None:
        if collective == names.BARRIER:
            return nm.timing(names.ALLREDUCE, 8.0, span, self.factors) if span.ranks > 1 \
                else Timing(0.0, "", "")
        if collective not in names.BUS_FACTORS:
            return None
        if span.ranks < 2:
            return Timing(0.0, "", "")
        return nm.timing(collective, float(size_bytes), span, self.factors, nvls_ok)

    def predict_us(self, collective: str, size_bytes: float, span: Span) -> float | None:
        """Time of one call (µs); None for a type the model has no factor for (unknown)."""
        t = self.timing(collective, size_bytes, span)
        return t.us if t is not None else None

    def busbw_gbs(self, collective: str, size_bytes: float, span: Span) -> float | None:
        """The nccl-tests bus bandwidth the model gives one call (GB/s)."""
        t = self.predict_us(collective, size_bytes, span)
        f = names.bus_factor(collective, span.ranks)
        if not t or f is None:
            return None
        return size_bytes / (t * 1e3) * f

    def error_pct(self, span: Span) -> float:
        """The range a projection over ``span`` carries: its fabric class's leave-one-
        system-out error, else its scope's largest."""
        cls = span.fabric_class
        if cls in self.error_by_class:
            return self.error_by_class[cls]
        net = ("inter", *nm.NET_CLASSES)
        known = [v for k, v in self.error_by_class.items() if (k in net) == (span.nodes > 1)]
        return max(known, default=DEFAULT_ERROR_PCT)


def factors_json(f: Factors) -> dict[str, Any]:
    return {"link_eta": dict(f.link_eta), "net_eta": dict(f.net_eta), "nvls_eta": f.nvls_eta,
            "p2p_eta": f.p2p_eta, "net_p2p_eta": f.net_p2p_eta, "self_steps": f.self_steps,
            "fill_mb": f.fill_mb, "lat_scale": dict(f.lat_scale),
            "net_lat_us": dict(f.net_lat_us), "net_ll_eta": dict(f.net_ll_eta),
            "pcie_oneway": f.pcie_oneway}


def parse_factors(data: Mapping[str, Any]) -> Factors:
    def table(key: str) -> dict[str, float]:
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            raise TypeError(f"{key} is not an object")
        return {str(k): float(v) for k, v in value.items()}

    scalars: dict[str, Any] = {k: float(data[k]) for k in (
        "nvls_eta", "p2p_eta", "net_p2p_eta", "self_steps", "fill_mb", "pcie_oneway") if k in data}
    return Factors(link_eta=table("link_eta"), net_eta=table("net_eta"),
                   net_lat_us=table("net_lat_us"), net_ll_eta=table("net_ll_eta"),
                   lat_scale=table("lat_scale"), **scalars)


def parse_model(data: Mapping[str, Any], source: str = "shipped") -> CommModel:
    """A model from its JSON (``comm_model.json``, or a ``rightsize comm fit`` file)."""
    if data.get("format") != FORMAT:
        raise ValueError(f"not a rightsize communication model (format {data.get('format')!r})")
    if int(data.get("version", 0)) > VERSION:
        raise ValueError(f"written by a newer rightsize (model version {data['version']}; "
                         f"this one reads {VERSION})")
    errors = {str(k): float(v) for k, v in data.get("error_pct", {}).items()}
    return CommModel(parse_factors(data["factors"]), errors, source)


@cache
def load_model() -> CommModel:
    """The shipped, fitted model (``catalog/data/comm_model.json``)."""
    text = resources.files("rightsize.catalog").joinpath("data/comm_model.json").read_text(
        "utf-8")
    return parse_model(json.loads(text))


def read_model(path: str | Path) -> CommModel:
    """A user's model file (``--comm-model``), checked; one-line errors."""
    p = Path(path)
    try:
        data = json.loads(p.read_text("utf-8"))
    except OSError as exc:
        raise InputError(p, f"cannot read the communication model ({exc.strerror or exc})") \
            from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(p, "not a communication model: not JSON (write one with "
                            "`rightsize comm fit LOG -o FILE`)") from None
    if not isinstance(data, dict):
        raise InputError(p, "not a communication model: not a JSON object")
    try:
        return parse_model(data, str(p))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(p, f"not a usable communication model: {exc}") from None


def _kind(op: str) -> str | None:
    return op if op in MODELLED else names.from_name(op)


def collective_time(op: str, size_bytes: float, span: Span, model: CommModel | None = None,
                    nvls_ok: bool = True) -> Timing | None:
    """One call of ``op`` (any name of its type) of ``size_bytes`` over ``span``: µs, and the
    algorithm and protocol NCCL runs it with; None for a type the model does not know."""
    kind = _kind(op)
    return None if kind is None else (model or load_model()).timing(kind, size_bytes, span,
                                                                     nvls_ok)


def collective_us(op: str, size_bytes: float, span: Span,
                  model: CommModel | None = None) -> float | None:
    """The stable entry point: µs one call of collective ``op`` of ``size_bytes`` (nccl-tests'
    size: the largest buffer of one rank) takes over ``span``; None for a type the model does
    not know. ``op`` is one of ``analyzers/job/names.TYPES`` or a name that says one
    (``all_reduce``, ``c10d::allreduce_``). Build ``span`` with :func:`span_for`."""
    t = collective_time(op, size_bytes, span, model)
    return t.us if t is not None else None


def collective_curve(op: str, span: Span, model: CommModel | None = None
                     ) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`collective_us` over an array of sizes (NaN for a type without a model), for
    callers that time many sizes (the serving step model)."""
    model = model or load_model()
    kind = _kind(op)

    def curve(sizes: np.ndarray) -> np.ndarray:
        flat = np.asarray(sizes, dtype=float).ravel()
        out = np.array([model.predict_us(kind, s, span) if kind else None for s in flat],
                       dtype=float)
        return out.reshape(np.shape(sizes))

    return curve


def span_for(gpu: Gpu, ranks: int, per_node: int | None = None,
             price: Price | None = None) -> Span:
    """What a collective of all ``ranks`` of ``gpu`` crosses, ``per_node`` to a node (None: as
    many as a node holds), on the system the price or the GPU's reference names."""
    return layout_for(gpu, ranks, per_node, price).span(ranks)


@dataclass(frozen=True, slots=True)
class CommProjection:
    """A rank's collectives on another layout, per step (ms)."""

    exposed_ms: float  # projected: the measured exposed fraction of each call type kept
    exposed_low_ms: float  # with the transfer divided by (1 + the class error)
    exposed_high_ms: float  # with the transfer multiplied by it
    measured_exposed_ms: float
    transfer_ms: float  # projected transfer (all calls, kernel time)
    wait_ms: float  # waiting for late ranks, held as measured (or estimated: see notes)
    held_ms: float  # kernel time of calls the model cannot project (no size, unknown type)
    measured_kernel_ms: float
    error_pct: float  # the largest class error among the projected calls' fabrics
    wait_estimated: bool  # some wait was not recorded: measured kernel - model on its fabric


def project_calls(works: Sequence[CommWork], measured: Layout, target: Layout,
                  model: CommModel | None = None) -> CommProjection:
    """The measured rank's collectives (``works``) on ``target`` instead of ``measured``.

    Each call type keeps its wait for late ranks (it comes from the ranks' imbalance, not from
    the link; a rank's trace alone does not record it: then it is the measured kernel time
    beyond what the model gives the measured fabric) and gets the model's transfer on the
    target: kernel' = wait + transfer(target), exposed' = exposed x kernel' / kernel (the
    overlapped fraction kept). A group of the whole job grows with the target's ranks; smaller
    groups (tensor-parallel pairs) keep their size. Calls without a size or of an unknown type
    are held as measured."""
    model = model or load_model()
    out = dict.fromkeys(("exposed", "low", "high", "measured", "transfer", "wait", "held",
                         "kernel", "error"), 0.0)
    estimated = False
    for w in works:
        out["measured"] += w.exposed_ms
        out["kernel"] += w.kernel_ms
        group = w.group_size or measured.ranks
        grown = target.ranks if group >= measured.ranks else group
        now = model.predict_us(w.collective, w.bytes or 0, measured.span(group))
        new_span = target.span(grown)
        new = model.predict_us(w.collective, w.bytes or 0, new_span)
        if w.bytes is None or now is None or new is None or math.isinf(new) or w.kernel_ms <= 0:
            out["held"] += w.kernel_ms
            for k in ("exposed", "low", "high"):
                out[k] += w.exposed_ms
            continue
        if w.wait_ms is None:
            estimated = True
        wait = w.wait_ms if w.wait_ms is not None else max(0.0, w.kernel_ms
                                                           - now * w.calls / 1e3)
        transfer = new * w.calls / 1e3
        err = model.error_pct(new_span) / 100
        out["error"] = max(out["error"], err * 100)
        out["transfer"] += transfer
        out["wait"] += wait
        share = w.exposed_ms / w.kernel_ms
        out["exposed"] += share * (wait + transfer)
        out["low"] += share * (wait + transfer / (1 + err))
        out["high"] += share * (wait + transfer * (1 + err))
    return CommProjection(out["exposed"], out["low"], out["high"], out["measured"],
                          out["transfer"], out["wait"], out["held"], out["kernel"],
                          out["error"], estimated)
