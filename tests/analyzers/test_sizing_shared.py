"""Sizing of the shared traces by precision: the bf16 BERT trace (H100) is never sent to a
V100 (no bf16 math), and the A100 trace whose GEMMs are TF32 (cutlass s1688gemm) is projected at
TF32 on the GPUs that have it."""

from __future__ import annotations

from rightsize.analyzers.document import Document


def _document(shared, name: str) -> Document:
    from rightsize.pipeline import analyze_document

    return analyze_document([shared / "traces" / "kineto" / name])


def test_bf16_bert_is_never_sent_to_a_v100(shared):
    bert = _document(shared, "tracelens-h100-gaunernst_bert-small-uncased__1016001.json.gz")
    sz = bert.sizing
    assert bert.precision.workload == "bf16"
    assert sz.current == "H100 SXM" and sz.recommended == "RTX 6000 Ada"  # within 10% of now
    v100 = [c for c in sz.candidates if c.gpu.startswith("V100")]
    assert {c.gpu for c in v100} == {"V100 16GB SXM2", "V100 32GB SXM2", "V100 32GB PCIe"}
    for c in v100:
        assert (c.precision_used, c.recommendable) == ("fp32", False)
        warning = f"the {c.gpu} has no bf16 math: projected at fp32, which changes numerics"
        assert c.warnings == (warning + " and speed",)
    l4 = sz.candidate("L4")
    assert l4.precision_used == "bf16" and l4.recommendable
    assert l4.projected_step_ms_low < l4.projected_step_ms < l4.projected_step_ms_high


def test_a100_tf32_gemms_are_projected_at_tf32(shared):
    doc = _document(shared, "hta-trace_diff-control-control.json.gz")
    assert doc.precision.workload == "tf32"
    assert doc.sizing.current == "A100 40GB SXM"
    used = {c.gpu: c.precision_used for c in doc.sizing.candidates if c.gpus == 1}
    assert used["A10"] == used["L4"] == used["H100 SXM"] == "tf32"
    assert used["T4"] == used["V100 32GB SXM2"] == "fp32"  # no TF32 before Ampere
