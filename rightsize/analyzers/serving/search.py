"""The plan search: every configuration screened by the fast path, the cheapest simulated.

Input: a model config, a :class:`~.plan.Load`, :class:`~.plan.Slo`, a :class:`Space` (GPUs,
degrees, batch limits, the GPU budget), the catalog, an optional calibration. Output:
:class:`Searched` (the simulated options, the rejections, how many configurations each stage
saw). Pure.

1. Deployments: each GPU x TP (1, 2, 4, 8 within a node) x PP; a pipeline over nodes only when
   the model does not fit one node (a pipeline inside a node is dominated by tensor parallel,
   and across nodes by replicas when one node holds the model). Rejected with the reason:
   no price, heads or KV heads not divisible by TP, weights or one longest request not fitting.
2. Screen: for each deployment, every ``max_num_seqs`` x ``max_num_batched_tokens`` x replicas
   within the budget through :func:`~.fastpath.evaluate` (vectorized). Per replica count the
   batch limits with the best fast-path margin are kept; a deployment's first candidate is the
   fewest replicas whose fast p95s are within :data:`SCREEN_MARGIN` of both SLOs.
3. Simulate in cost order: a candidate that meets both SLOs in simulation is tried with one
   replica fewer, one that misses with one more, until the cheapest candidate left costs more
   than the best met (the recommendation), then the next deployments' cheapest for the
   frontier, at most :data:`MAX_SIMULATIONS` simulations.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rightsize.analyzers.serving.factors import Calibration
from rightsize.analyzers.serving.fastpath import Curves, evaluate
from rightsize.analyzers.serving.latency import Summary, summarize
from rightsize.analyzers.serving.plan import Load, Option, Rejected, Slo
from rightsize.analyzers.serving.simulate import Limits, simulate
from rightsize.analyzers.serving.step import Deployment, ModelConfig, ServingStep, fits, step_model
from rightsize.analyzers.serving.tabulated import Tabulated
from rightsize.catalog import Catalog, Price

if TYPE_CHECKING:
    from rightsize.analyzers.serving.tables import Tables

TPS = (1, 2, 4, 8)
PPS = (1, 2, 4)
MAX_NUM_SEQS = (8, 16, 32, 64, 128, 256, 512, 1024)
MAX_BATCHED_TOKENS = (512, 1024, 2048, 4096, 8192, 16384)
GPUS_PER_NODE = 8  # when the catalog does not fix it (PCIe servers, cloud instances)
SCREEN_MARGIN = 1.25  # simulate what the fast path puts up to 25% over an SLO (its error)
MAX_SIMULATIONS = 40
FRONTIER = 8  # deployments whose cheapest plan is simulated for the frontier
SKIP = 0.1  # share of requests at each end dropped from the p95s (warm-up, drain)


@dataclass(frozen=True, slots=True)
class Space:
    gpus: tuple[str, ...]
    max_gpus: int
    precision: str = "bf16"
    engine: str = "vllm"  # Deployment.engine
    tps: tuple[int, ...] = TPS
    pps: tuple[int, ...] = PPS
    max_num_seqs: tuple[int, ...] = MAX_NUM_SEQS
    max_batched_tokens: tuple[int, ...] = MAX_BATCHED_TOKENS


@dataclass
class Candidate:
    """One feasible deployment and its screened grid."""

    dep: Deployment
    model: ServingStep
    price: Price
    replicas: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    batched: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    score: np.ndarray = field(default_factory=lambda: np.zeros(0))  # max(p95 / SLO), fast
    ttft: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tpot: np.ndarray = field(default_factory=lambda: np.zeros(0))
    table: Tabulated | None = None

    @property
    def gpus_per_replica(self) -> int:
        return self.dep.tp * self.dep.pp

    def cost(self, replicas: int) -> float:
        return replicas * self.gpus_per_replica * self.price.usd_per_gpu_hour

    def best_at(self, replicas: int) -> int | None:
        """Index of the batch limits with the best fast-path margin at ``replicas``."""
        at = np.flatnonzero(self.replicas == replicas)
        if at.size == 0:
            return None
        return int(at[np.argmin(self.score[at])])

    def label(self) -> str:
        pp = f" PP {self.dep.pp}" if self.dep.pp > 1 else ""
        return f"{self.dep.gpu} TP {self.dep.tp}{pp}"


@dataclass
class Searched:
    options: list[Option]  # every simulated configuration
    rejected: list[Rejected]
    candidates: list[Candidate]
    evaluated: int
    simulated: int
    truncated: bool


def deployments(config: ModelConfig, load: Load, space: Space, catalog: Catalog,
                calibration: Calibration | None, tables: Tables | None = None,
                ) -> tuple[list[Candidate], list[Rejected]]:
    out: list[Candidate] = []
    rejected: list[Rejected] = []
    for name in space.gpus:
        gpu = catalog.gpu(name)
        price = catalog.price(gpu.name)
        if price is None:
            rejected.append(Rejected(gpu.name, "no price in the catalog (add one with "
                                               "--catalog)"))
            continue
        per_node = gpu.gpus_per_node or GPUS_PER_NODE
        node_fits = False
        for pp in space.pps:
            for tp in space.tps:
                if tp > per_node or tp * pp > space.max_gpus or (pp > 1 and (
                        tp != per_node or node_fits)):
                    continue
                dep = Deployment(gpu.name, tp, pp, space.precision, engine=space.engine)
                label = f"{gpu.name} TP {tp}" + (f" PP {pp}" if pp > 1 else "")
                why = fits(config, dep, catalog=catalog, batch=1, seq=load.longest)
                if why is not None:
                    rejected.append(Rejected(label, why))
                    continue
                node_fits = node_fits or pp == 1
                model = step_model(config, dep, calibration=calibration, catalog=catalog,
                                   tables=tables)
                out.append(Candidate(dep, model, price))
    return out, rejected


def screen(c: Candidate, load: Load, slo: Slo, space: Space) -> Candidate:
    """A copy of the candidate with its grid's fast-path p95s for this load."""
    c = Candidate(c.dep, c.model, c.price)
    top = space.max_gpus // c.gpus_per_replica
    seqs, batched = np.meshgrid(space.max_num_seqs, space.max_batched_tokens, indexing="ij")
    ok = batched >= seqs  # vLLM refuses max_num_batched_tokens < max_num_seqs
    seqs, batched = seqs[ok], batched[ok]
    reps = np.arange(1, top + 1)
    r, i = np.meshgrid(reps, np.arange(seqs.size), indexing="ij")
    c.replicas, c.seqs, c.batched = r.ravel(), seqs[i.ravel()], batched[i.ravel()]
    curves = Curves.of(c.model.step_ms_vec, int(max(space.max_num_seqs)), load.isl, load.osl,
                       load.isl_high)
    est = evaluate(curves, load.rate_per_s / c.replicas, c.seqs, c.batched,
                   np.full(c.replicas.size, c.model.kv_cache_tokens), load.isl, load.osl,
                   load.isl_high)
    c.ttft, c.tpot = est.ttft_p95_ms, est.tpot_p95_ms
    c.score = np.maximum(c.ttft / slo.ttft_p95_ms, c.tpot / slo.tpot_p95_ms)
    return c


def first_replicas(c: Candidate) -> int | None:
    """The fewest replicas whose best batch limits the fast path puts within the margin."""
    passing = c.replicas[c.score <= SCREEN_MARGIN]
    return int(passing.min()) if passing.size else None


def simulate_option(c: Candidate, load: Load, replicas: int, index: int, slo: Slo,
                    scale: tuple[float, float] = (1.0, 1.0),
                    rate_scale: float = 1.0) -> tuple[Summary, Option]:
    """The full simulation of one configuration (all its replicas' requests pooled)."""
    limits = Limits(int(c.seqs[index]), int(c.batched[index]), c.model.kv_cache_tokens)
    if c.table is None:
        c.table = Tabulated(c.model.step_ms_vec, max(int(c.seqs.max()), 1),
                            max(int(c.batched.max()), int(load.isl_high)), load.longest,
                            prompts=(int(load.isl),) if load.csv is None else ())
    table = c.table.scaled(*scale)
    parts = load.per_replica(replicas, rate_scale)
    s = summarize(tuple(simulate(p, limits, table) for p in parts), SKIP)
    tokens = s.output_tokens_per_s * (replicas if load.csv is None else 1)
    o = Option(c.dep.gpu, c.dep.tp, c.dep.pp, replicas, limits.max_num_seqs,
               limits.max_num_batched_tokens, replicas * c.gpus_per_replica, c.cost(replicas),
               f"{c.price.provider} {c.price.instance_type} ({c.price.date_seen or 'undated'})",
               s.ttft_ms.p95, s.tpot_ms.p95, tokens_per_s=tokens,
               kv_cache_peak_pct=s.kv_cache_peak_pct, preemptions=s.preemptions,
               meets=bool(s.ttft_ms.p95 <= slo.ttft_p95_ms and s.tpot_ms.p95 <= slo.tpot_p95_ms))
    return s, o


def search(found: list[Candidate], load: Load, slo: Slo, space: Space,
           rejected: list[Rejected]) -> Searched:
    """Screen every deployment in ``found`` and simulate the cheapest (module docstring)."""
    rejected = list(rejected)
    cands = [screen(c, load, slo, space) for c in found]
    evaluated = sum(int(c.replicas.size) for c in cands)
    heap: list[tuple[float, int, int]] = []
    for k, c in enumerate(cands):
        first = first_replicas(c)
        if first is None:
            rejected.append(Rejected(c.label(), _fast_miss(c, slo, space)))
        else:
            heapq.heappush(heap, (c.cost(first), k, first))
    options: list[Option] = []
    seen: set[tuple[int, int]] = set()
    met: dict[int, Option] = {}  # per candidate: its cheapest met option
    best = np.inf
    sims = 0
    while heap and sims < MAX_SIMULATIONS:
        cost, k, reps = heapq.heappop(heap)
        if cost > best * (1 + 1e-9) and (len(met) >= FRONTIER or k in met):
            continue
        c = cands[k]
        index = c.best_at(reps)
        if (k, reps) in seen or index is None:
            continue
        seen.add((k, reps))
        _, o = simulate_option(c, load, reps, index, slo)
        sims += 1
        options.append(o)
        if o.meets:
            if k not in met or o.cost_per_hour_usd < met[k].cost_per_hour_usd:
                met[k] = o
            best = min(best, o.cost_per_hour_usd)
            if reps > 1 and (k, reps - 1) not in seen:
                heapq.heappush(heap, (c.cost(reps - 1), k, reps - 1))
        elif k not in met and (k, reps + 1) not in seen and c.best_at(reps + 1) is not None:
            heapq.heappush(heap, (c.cost(reps + 1), k, reps + 1))
        elif k not in met and c.best_at(reps + 1) is None:
            rejected.append(Rejected(c.label(), _sim_miss(o, slo, space)))
    return Searched(options, rejected, cands, evaluated, sims, bool(heap) and
                    sims >= MAX_SIMULATIONS)


def _fast_miss(c: Candidate, slo: Slo, space: Space) -> str:
    i = int(np.argmin(c.score))
    top = int(c.replicas.max())
    if not np.isfinite(c.score[i]):
        return (f"over capacity even at {top} replicas (the most --max-gpus {space.max_gpus} "
                "allows): requests arrive faster than they finish")
    return (f"the fast path's best, {int(c.replicas[i])} replicas with max_num_seqs "
            f"{int(c.seqs[i])}, reaches TTFT p95 {c.ttft[i]:.0f} ms and TPOT p95 "
            f"{c.tpot[i]:.1f} ms (SLO {slo.ttft_p95_ms:g} / {slo.tpot_p95_ms:g} ms; at most "
            f"{top} replicas within --max-gpus {space.max_gpus})")


def _sim_miss(o: Option, slo: Slo, space: Space) -> str:
    return (f"simulated at {o.replicas} replicas (the most --max-gpus {space.max_gpus} "
            f"allows): TTFT p95 {o.ttft_p95_ms:.0f} ms, TPOT p95 {o.tpot_p95_ms:.1f} ms "
            f"(SLO {slo.ttft_p95_ms:g} / {slo.tpot_p95_ms:g} ms)")
