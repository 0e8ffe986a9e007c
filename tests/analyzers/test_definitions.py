"""``definitions="tb-plugin"`` end to end: the analysis document shows the TensorBoard plugin's
own numbers (../shared/reference/tb-plugin-reference.json), defects included."""

from __future__ import annotations

import pytest

import rightsize
from tests.analyzers.test_reference import DEFECTS, NEG_TOTAL, TB
from tests.conftest import shared_path

pytestmark = pytest.mark.shared
ROLES = {"Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset",
         "Communication": "communication", "Runtime": "runtime", "DataLoader": "dataloader",
         "CpuOp": "cpu_exec", "Other": "other", "Total": "step"}


@pytest.mark.parametrize("name", sorted(TB))
def test_document_equals_the_plugin_with_tb_plugin_definitions(name):
    if NEG_TOTAL in DEFECTS.get(name, []):
        pytest.skip(NEG_TOTAL + " (rightsize uses the trace span)")
    ref = TB[name]
    doc = rightsize.analyze(shared_path("traces", "kineto", name),
                            definitions="tb-plugin").document
    assert doc.steps.count == ref["steps"]
    b = doc.metrics.breakdown_ms
    total = ref["avg_costs_us"]["Total"]
    for role, us in ref["avg_costs_us"].items():
        assert getattr(b, ROLES[role]) * 1000 == pytest.approx(us, abs=0.01 * abs(total) + 0.01)
    for dev in doc.devices:
        util = ref["gpu_util"].get(str(dev.index))
        if util is not None:
            assert dev.metrics.gpu_util_pct == pytest.approx(100 * util, abs=0.1)
    assert "defects reproduced" in doc.definitions["breakdown_ms"]
