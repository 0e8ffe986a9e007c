"""The analyzer switches behind each named set of definitions.

``rightsize`` applies the reference definitions with their known defects fixed;
``tb-plugin`` switches the TensorBoard plugin's defects back on (``StepOptions``,
``BreakdownOptions``), so every plugin-defined number equals what TensorBoard shows.
"""

from __future__ import annotations

from rightsize.analyzers.metrics.steps import StepOptions
from rightsize.analyzers.metrics.tb_plugin import BreakdownOptions
from rightsize.errors import RightsizeError

PLUGIN_STEPS = StepOptions(legacy_runtime_only=True, gpu_annotation_steps=True)
PLUGIN_BREAKDOWN = BreakdownOptions(legacy_runtime_only=True, plugin_comm_rules=True)


def options_for(definitions: str) -> tuple[StepOptions, BreakdownOptions]:
    if definitions == "rightsize":
        return StepOptions(), BreakdownOptions()
    if definitions == "tb-plugin":
        return PLUGIN_STEPS, PLUGIN_BREAKDOWN
    raise RightsizeError(f"unknown definitions {definitions!r} (choose from rightsize, tb-plugin)")
