"""``rightsize serving plan``: the cheapest deployment that meets TTFT and TPOT p95 SLOs at a
load, the cost frontier, and what was rejected and why.

Input: a model config, a :class:`Load` (the requests the simulation serves and their rate),
:class:`Slo`, the GPUs to consider, the GPU budget, the catalog (prices, memory, GPUs per node)
and an optional calibration. Output: a frozen :class:`ServingPlan` (its ``to_json`` is the JSON
contract, docs/serving.md). Pure.

The search (:mod:`.search`) crosses GPU type x tensor parallel x pipeline parallel x replicas x
``max_num_seqs`` x ``max_num_batched_tokens`` (vLLM V1 always chunks prefills). Every
configuration is screened by the fast path (:mod:`.fastpath`); the cheapest ones are then
simulated (:mod:`.simulate`), and only simulated p95s decide: the recommendation is the
cheapest configuration whose simulated TTFT and TPOT p95 meet both SLOs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rightsize.analyzers.serving.load import poisson, split
from rightsize.analyzers.serving.simulate import Requests
from rightsize.errors import RightsizeError
from rightsize.node import Node, internal, node, num

PLAN_SCHEMA_VERSION = 1


class NoPlan(RightsizeError):
    """No configuration of the listed GPUs meets the SLOs (the message says the fastest)."""


@dataclass(frozen=True, slots=True)
class Slo:
    ttft_p95_ms: float
    tpot_p95_ms: float


@dataclass(frozen=True, slots=True)
class Load:
    """What the plan serves. A Poisson load (``csv`` None) is simulated per replica at
    ``rate / replicas`` with ``requests`` requests; a CSV's requests are dealt to the replicas
    at random (:func:`~.load.split`)."""

    rate_per_s: float
    isl: float  # mean prompt tokens
    osl: float  # mean output tokens
    isl_high: float  # 95th percentile prompt (the TTFT tail's prefill)
    longest: int  # the longest request, prompt + output tokens
    source: str
    requests: int
    seed: int = 0
    csv: Requests | None = None

    @staticmethod
    def poisson(rate_per_s: float, isl: int, osl: int, requests: int, seed: int = 0) -> Load:
        return Load(rate_per_s, isl, osl, isl, isl + osl,
                    f"Poisson arrivals at {rate_per_s:g} req/s, {isl} prompt and {osl} output "
                    "tokens each", requests, seed)

    @staticmethod
    def of_csv(reqs: Requests, rate_per_s: float, source: str, seed: int = 0) -> Load:
        return Load(rate_per_s, float(np.mean(reqs.prompt_tokens)),
                    float(np.mean(reqs.output_tokens)),
                    float(np.percentile(reqs.prompt_tokens, 95)),
                    int((reqs.prompt_tokens + reqs.output_tokens).max()), source, len(reqs),
                    seed, reqs)

    def per_replica(self, replicas: int, rate_scale: float = 1.0) -> tuple[Requests, ...]:
        """The requests each simulated replica serves (one replica stands for all under a
        Poisson load: a random share of a Poisson stream is Poisson)."""
        if self.csv is None:
            return (poisson(self.rate_per_s * rate_scale / replicas, int(self.isl),
                            int(self.osl), self.requests, self.seed),)
        reqs = self.csv
        if rate_scale != 1.0:
            reqs = Requests(reqs.arrival_s / rate_scale, reqs.prompt_tokens, reqs.output_tokens)
        return split(reqs, replicas, self.seed)


@node
class Option(Node):
    """One configuration with its cost and latencies (simulated unless ``source`` says)."""

    gpu: str
    tp: int
    pp: int
    replicas: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpus: int
    cost_per_hour_usd: float = num(4, default=0.0)
    price: str = ""  # provider, instance and when the price was seen
    ttft_p95_ms: float = num(3, default=float("nan"))
    tpot_p95_ms: float = num(3, default=float("nan"))
    tokens_per_s: float = num(2, default=0.0)  # output tokens per second, all replicas
    kv_cache_peak_pct: float = num(2, default=0.0)
    preemptions: int = 0
    meets: bool = False
    # at the step model's low and high ends (simulated for the recommended plan)
    ttft_p95_ms_low: float | None = num(3, default=None)
    ttft_p95_ms_high: float | None = num(3, default=None)
    tpot_p95_ms_low: float | None = num(3, default=None)
    tpot_p95_ms_high: float | None = num(3, default=None)
    source: str = "simulated"

    @property
    def label(self) -> str:
        pp = f" PP {self.pp}" if self.pp > 1 else ""
        return (f"{self.replicas} x {self.gpu} TP {self.tp}{pp}, max_num_seqs "
                f"{self.max_num_seqs}, max_num_batched_tokens {self.max_num_batched_tokens}")


@node
class Rejected(Node):
    config: str
    why: str


@node
class Mixed(Node):
    """Two GPU types, one for short requests and one for long (split by prompt + output
    tokens at ``threshold_tokens``), cheaper together than the best single type."""

    threshold_tokens: int
    short: Option
    long: Option
    short_share_pct: float = num(2)
    cost_per_hour_usd: float = num(4)
    saving_pct: float = num(2)  # against the recommended single-type plan


@node
class Curve(Node):
    """Simulated p95s of one configuration at several rates (the HTML's latency-vs-rate)."""

    label: str
    rate_per_s: tuple[float, ...]
    ttft_p95_ms: tuple[float, ...]
    tpot_p95_ms: tuple[float, ...]


@node
class ServingPlan(Node):
    schema_version: int
    model: str
    rate_per_s: float = num(4, default=0.0)
    load: str = ""
    isl_mean: float = num(2, default=0.0)
    osl_mean: float = num(2, default=0.0)
    ttft_p95_slo_ms: float = num(3, default=0.0)
    tpot_p95_slo_ms: float = num(3, default=0.0)
    recommended: Option | None = None
    vllm_args: tuple[str, ...] = ()
    frontier: tuple[Option, ...] = ()
    mixed: Mixed | None = None
    mixed_note: str = ""
    rejected: tuple[Rejected, ...] = ()
    evaluated: int = 0  # configurations the fast path screened
    simulated: int = 0  # configurations simulated
    requests_simulated: int = 0  # requests per simulation
    calibrated_by: str = ""
    assumes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    curves: tuple[Curve, ...] = internal(default=())
    engine: str = "vllm"  # Deployment.engine: "vllm" (V1) or "vllm-v0"


def vllm_args(o: Option, gpu_memory_utilization: float, kv_cache: str = "",
              engine: str = "vllm") -> tuple[str, ...]:
    """The ``vllm serve`` arguments of one replica of ``o`` (``--kv-cache-dtype fp8`` when the
    plan was sized for an fp8 KV cache: vLLM's default keeps it 16-bit; under ``vllm-v0``
    ``--enable-chunked-prefill``, which the simulation assumes and V0 turns on by itself only
    past 32K-token contexts)."""
    out = [f"--tensor-parallel-size {o.tp}"]
    if o.pp > 1:
        out.append(f"--pipeline-parallel-size {o.pp}")
    if kv_cache == "fp8":
        out.append("--kv-cache-dtype fp8")
    if engine == "vllm-v0":
        out.append("--enable-chunked-prefill")
    return (*out, f"--max-num-seqs {o.max_num_seqs}",
            f"--max-num-batched-tokens {o.max_num_batched_tokens}",
            f"--gpu-memory-utilization {gpu_memory_utilization:g}")


def impossible(slo: Slo, rate: float, metric: str, fastest_ms: float, label: str) -> NoPlan:
    """The one line for SLOs no configuration meets."""
    limit = slo.ttft_p95_ms if metric == "TTFT" else slo.tpot_p95_ms
    reached = f"{fastest_ms:.0f}" if fastest_ms >= 100 else f"{fastest_ms:.3g}"
    return NoPlan(f"no configuration of the listed GPUs meets {metric} p95 <= {limit:g} ms at "
                  f"{rate:g} req/s; the fastest reaches {reached} ms ({label})")
