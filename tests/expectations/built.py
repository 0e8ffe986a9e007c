"""The inputs of the expectations suite that are built, not recorded: each as faithful as the
real file it stands for (see each builder's module), written into a folder at test time.

A key ``built:NAME`` of tests/expectations/expectations.json names one of :data:`BUILDERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.nvsmi_log import write_log
from tests.zero_shot_trace import zero_shot_trace

PREFIX = "built:"
BUILDERS: dict[str, Callable[[Path], Path]] = {
    # a Hugging Face zero-shot detection pipeline (OWLv2), with_stack: tests/zero_shot_trace.py
    "zero-shot-owlv2-pipeline": lambda d: zero_shot_trace(d / "owlv2.pt.trace.json"),
    # nvidia-smi --query-gpu=timestamp,name,pci.bus_id,... -l 1 on 8 H100s: tests/nvsmi_log.py
    "nvidia-smi-8xh100-stall": lambda d: write_log(d / "gpus.csv"),
    "nvidia-smi-8xh100-stall-no-bus-id": lambda d: write_log(d / "gpus.csv", bus_id=False),
}


def build(name: str, folder: Path) -> Path:
    """The input ``built:NAME`` written into ``folder``."""
    return BUILDERS[name.removeprefix(PREFIX)](folder)
