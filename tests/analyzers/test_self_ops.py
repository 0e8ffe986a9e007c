"""Host ops by self time per call path: exact values on an inline trace and a real one."""

from __future__ import annotations

import polars as pl

from rightsize.analyzers.metrics.self_ops import self_ops
from rightsize.traces.kineto import read_kineto
from tests.conftest import shared_path
from tests.framebuilder import FrameBuilder


def _conv(fb: FrameBuilder, t: float, ext: int | None) -> FrameBuilder:
    return (fb.op("aten::conv2d", t, 100).op("aten::convolution", t + 5, 90)
            .op("aten::cudnn_convolution", t + 10, 80, ext=ext))


def test_self_time_goes_to_the_op_that_spent_it_once_per_call_path():
    fb = FrameBuilder()
    fb.x("python_function", "nn.Module: Conv2d_0", 0, 100)
    _conv(fb, 0, 1).launch("cudaLaunchKernel", 20, 5, corr=1, ext=1)
    fb.kernel("conv_kernel", 30, 40, corr=1, ext=1)
    _conv(fb, 200, None)
    fb.op("ConvolutionBackward0", 400, 300).op("aten::convolution_backward", 410, 280)
    fb.op("aten::fill_", 420, 10).op("aten::fill_", 800, 5)
    fb.op("aten::outer", 900, 100).op("aten::inner", 950, 100)  # a child that outlives it
    rows = {tuple(r["path"]): r for r in self_ops(fb.trace()).to_dicts()}
    conv = ("aten::conv2d", "aten::convolution", "aten::cudnn_convolution")
    assert rows[conv] == {"name": "aten::cudnn_convolution", "path": list(conv),
                          "module": "Conv2d_0", "calls": 2, "self_ns": 160_000,
                          "host_ns": 160_000, "gpu_ns": 40_000, "kernels": 1}
    assert rows[conv[:2]]["self_ns"] == 20_000 and rows[conv[:1]]["self_ns"] == 20_000
    assert rows[conv[:1]]["host_ns"] == 200_000  # inclusive, as top_ops reports it
    back = ("ConvolutionBackward0", "aten::convolution_backward")
    assert rows[back]["self_ns"] == 270_000 and rows[back[:1]]["self_ns"] == 20_000
    assert rows[(*back, "aten::fill_")]["self_ns"] == 10_000
    assert rows[("aten::fill_",)]["self_ns"] == 5_000  # the same op elsewhere: its own row
    assert rows[("aten::outer",)]["self_ns"] == 50_000
    assert rows[("aten::outer", "aten::inner")]["self_ns"] == 100_000
    assert rows[back]["module"] is None
    order = [tuple(p) for p in self_ops(fb.trace())["path"].to_list()]
    assert order[:3] == [conv, back, ("aten::outer", "aten::inner")]  # GPU time, then self


def test_self_times_add_up_to_the_top_level_ops_on_a_real_trace():
    path = shared_path("traces", "kineto",
                       "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz")
    trace = read_kineto(path)
    every = self_ops(trace, k=1_000_000)
    ops = trace.cpu_ops.filter((pl.col("cat") == "cpu_op") & (pl.col("dur_ns") > 0))
    assert int(every["calls"].sum()) == ops.height
    assert int(every["self_ns"].sum()) == 967_374_000  # = the top-level ops' durations summed
    top = every.row(0, named=True)
    assert top["path"] == ["CudnnConvolutionBackward", "aten::cudnn_convolution_backward",
                           "aten::cudnn_convolution_backward_weight"]
    assert (top["calls"], top["self_ns"], top["gpu_ns"], top["kernels"]) == (
        318, 33_153_000, 141_933_000, 684)
    # the op's name appears once per call path, never once per wrapper
    assert every.filter(pl.col("name") == "aten::cudnn_convolution").height == 1


def test_a_long_trace_nests_the_same():
    # hours apart (time ranks instead of ns in the nesting key): the same values
    fb = FrameBuilder()
    fb.op("aten::outer", 0, 100).op("aten::inner", 10, 50)
    fb.op("aten::outer", 3_600_000_000, 100).op("aten::inner", 3_600_000_020, 30)
    rows = {tuple(r["path"]): r for r in self_ops(fb.trace()).to_dicts()}
    assert rows[("aten::outer",)]["self_ns"] == 120_000
    assert rows[("aten::outer", "aten::inner")]["self_ns"] == 80_000


def test_a_module_run_inside_an_op_is_not_the_ops_own_time():
    # activation checkpointing: the backward op re-runs a forward module
    fb = FrameBuilder()
    fb.op("CheckpointFunctionBackward", 0, 100)
    fb.x("python_function", "nn.Module: Linear_0", 10, 60).op("aten::linear", 20, 40)
    rows = {tuple(r["path"]): r for r in self_ops(fb.trace()).to_dicts()}
    assert rows[("CheckpointFunctionBackward",)]["self_ns"] == 40_000
    linear = rows[("CheckpointFunctionBackward", "aten::linear")]
    assert (linear["self_ns"], linear["module"]) == (40_000, "Linear_0")
