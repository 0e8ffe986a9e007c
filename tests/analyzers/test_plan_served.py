"""``rightsize plan --hf-config``: the serving step model bounds the batch by the KV cache that
fits beside its weights, activations and overhead, and scales the projected step to that batch
(it was: the estimator's KV-only bound with the step unchanged)."""

from __future__ import annotations

import math

import pytest

from rightsize.analyzers.plan import demand as dm
from rightsize.analyzers.plan.plan import PlanInputs, build
from rightsize.analyzers.plan.serving import kv_budget
from rightsize.analyzers.plan.workload import from_document
from rightsize.analyzers.serving.step import Deployment, memory_bytes, step_model
from rightsize.analyzers.sizing.hf_config import from_hf_config
from rightsize.cli.estimate import read_hf_config
from rightsize.vocab import Precision
from tests.analyzers.test_plan import CATALOG, _candidate, make_doc
from tests.conftest import SAMPLES

SEQ = 16384


def test_the_serving_model_bounds_and_scales_the_batch() -> None:
    shape = from_hf_config(read_hf_config(SAMPLES / "configs" / "Meta-Llama-3-8B.json"), "l3")
    kv = kv_budget(shape, Precision.BF16, SEQ)
    doc = make_doc([_candidate("H100 SXM", 50.0, 45.0, 55.0), _candidate("L4", 80.0)])
    p = build(doc, from_document(doc), PlanInputs(64, "samples", None, dm.constant(100), 0.2, kv,
                                                  shape), CATALOG)
    for gpu, step in (("H100 SXM", 50.0), ("L4", 80.0)):
        g = CATALOG.gpu(gpu)
        fixed, per_token = memory_bytes(shape, Deployment(gpu), g)
        # 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes
        assert per_token == 2 * 32 * 8 * 128 * 2 == 131072
        limit = math.floor((g.memory_bytes * 0.8 - fixed) / (per_token * SEQ))
        model = step_model(shape, Deployment(gpu), catalog=CATALOG)
        scale = model.decode([SEQ // 2] * limit).ms / model.decode([SEQ // 2] * 64).ms
        c = p.capacity(gpu)
        assert c is not None and c.batch == limit < 64
        assert scale < 1  # a smaller batch decodes faster
        assert c.step_ms == pytest.approx(step * scale)
        assert c.per_replica_per_s == round(limit * 1000 / (step * scale), 3)
        assert c.batch_source.startswith(f"KV cache bound: {limit} requests of {SEQ} tokens fit"
                                         f"; step x{scale:.3g}")
        assert c.step_source.endswith("at the KV-bound batch (serving model)")
    h100 = p.capacity("H100 SXM")
    assert h100 is not None and h100.step_ms_low == pytest.approx(45.0 * h100.step_ms / 50.0)
