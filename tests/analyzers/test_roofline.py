"""FLOPs and bytes of each op type, against hand-computed values."""

from __future__ import annotations

import pytest

from rightsize.analyzers.diagnosis.roofline import ShapeNote, estimate, op_cost

BF16, F32 = "c10::BFloat16", "float"


@pytest.mark.parametrize("name,dims,types,concrete,flops,nbytes", [
    # mm [64,128]x[128,256]: 2*64*128*256; (64*128 + 128*256 + 64*256) * 2 bytes
    ("aten::mm", [[64, 128], [128, 256]], [BF16, BF16], None, 4194304, 114688),
    # addmm bias[256] + [64,128]x[128,256]: + 64*256 adds; bytes add the bias
    ("aten::addmm", [[256], [64, 128], [128, 256]], [F32, F32, F32], None,
     4194304 + 16384, (256 + 8192 + 32768 + 16384) * 4),
    # bmm [8,32,64]x[8,64,16]: 2*8*32*64*16; 8*(32*64 + 64*16 + 32*16) * 4
    ("aten::bmm", [[8, 32, 64], [8, 64, 16]], [F32, F32], None, 524288, 8 * 3584 * 4),
    # linear x[2,10,128] W[64,128] b[64]: rows 20; 2*20*128*64 + 20*64
    ("aten::linear", [[2, 10, 128], [64, 128], [64]], [BF16, BF16, BF16], None,
     327680 + 1280, (2560 + 8192 + 64 + 1280) * 2),
    # matmul broadcasting [4,8,16]x[16,32] -> batch 4
    ("aten::matmul", [[4, 8, 16], [16, 32]], [F32, F32], None, 2 * 4 * 8 * 16 * 32,
     (512 + 512 + 4 * 8 * 32) * 4),
    # conv2d x[2,3,32,32] w[16,3,3,3] stride 2 pad 1: out 16x16; 2*2*16*256*3*9
    ("aten::conv2d", [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
     [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
     ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"], 2 * 2 * 16 * 256 * 27,
     (6144 + 432 + 16 + 2 * 16 * 256) * 4),
    # SDPA q,k,v [2,4,128,64]: 2*8*128*128*64 twice; q+k+v+out
    ("aten::scaled_dot_product_attention", [[2, 4, 128, 64]] * 3, [BF16] * 3, None,
     2 * 2 * 8 * 128 * 128 * 64, 4 * 65536 * 2),
    # flash forward takes (batch, seq, heads, dim): the same attention
    ("aten::_flash_attention_forward", [[2, 128, 4, 64]] * 3, [BF16] * 3, None,
     2 * 2 * 8 * 128 * 128 * 64, 4 * 65536 * 2),
    # elementwise add [1024] + [1024]: 1024 FLOPs; 3 tensors * 1024 * 4
    ("aten::add", [[1024], [1024], []], [F32, F32, "Scalar"], None, 1024, 3 * 4096),
    # reduction sum [32, 1024]: 32768 FLOPs; input + a scalar-sized output
    ("aten::sum", [[32, 1024]], [F32], None, 32768, 32768 * 4 + 4),
    # layer norm [8,512] w[512] b[512]: 5 FLOPs/element; in + params + out
    ("aten::layer_norm", [[8, 512], [], [512], [512]], [BF16, "", BF16, BF16], None,
     5 * 4096, (4096 + 512 + 512 + 4096) * 2),
    # softmax [16, 100]: 5 FLOPs/element; read + write
    ("aten::_softmax", [[16, 100], [], []], [F32, "Scalar", "Scalar"], None, 8000, 2 * 1600 * 4),
    # embedding W[1000, 64] idx[4, 16] (int64): rows 64 gathered, read + written
    ("aten::embedding", [[1000, 64], [4, 16]], [F32, "long int"], None, 0, 64 * 8 + 2 * 64 * 64 * 4),
    # copy_ [256, 256] fp16: read + write
    ("aten::copy_", [[256, 256], [256, 256], []], ["c10::Half", F32, "Scalar"], None, 0,
     2 * 65536 * 2),
])
def test_op_costs(name, dims, types, concrete, flops, nbytes):
    cost = op_cost(name, dims, types, concrete)
    assert cost is not None
    assert (cost.flops, cost.bytes) == (flops, nbytes)


def test_unmodelled_or_shapeless_ops_have_no_cost():
    assert op_cost("aten::mm", None, None) is None
    assert op_cost("aten::empty", [[4]], ["float"]) is None
    assert op_cost("aten::mm", [[4, 3], [5, 6]], ["float", "float"]) is None  # K mismatch


def test_precision_and_intensity():
    c = op_cost("aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16])
    assert c.precision == "bf16"
    assert c.intensity == pytest.approx(2 * 4096**3 / (3 * 4096**2 * 2))


# One convolution, x[2,3,32,32] w[16,3,3,3] b[16], stride 2, padding 1, dilation 1, recorded by
# each op with its own ATen argument order (layouts as in the shared traces' Input Dims /
# Concrete Inputs). Reading padding from the stride slot would give a 30x30 output instead.
CONV_FLOPS = 2 * 2 * 16 * (16 * 16) * 3 * 9
CONV_IO = 2 * 3 * 32 * 32 + 16 * 3 * 9 + 2 * 16 * 16 * 16  # x + w + out elements
SL, S = "ScalarList", "Scalar"


@pytest.mark.parametrize("name,dims,types,concrete,nbias", [
    ("aten::conv2d", [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
     [F32, F32, F32, SL, SL, SL, S], ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"], 16),
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    ("aten::convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [16]] + [[]] * 6,
     [F32, F32, F32, SL, SL, SL, S, SL, S],
     ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"], 16),
    # _convolution: the same, plus benchmark, deterministic, cudnn_enabled, allow_tf32
    ("aten::_convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [16]] + [[]] * 10,
     [F32, F32, F32, SL, SL, SL, S, SL, S, S, S, S, S],
     ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "False", "False",
      "True", "True"], 16),
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): no bias
    ("aten::cudnn_convolution", [[2, 3, 32, 32], [16, 3, 3, 3]] + [[]] * 7,
     [F32, F32, SL, SL, SL, S, S, S, S],
     ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"], 0),
    # miopen_convolution(self, weight, bias, padding, stride, dilation, groups, ...)
    ("aten::miopen_convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [16]] + [[]] * 6,
     [F32, F32, F32, SL, SL, SL, S, S, S],
     ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False"], 16),
    # mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups)
    ("aten::mkldnn_convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [16]] + [[]] * 4,
     [F32, F32, F32, SL, SL, SL, S], ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"], 16),
])
def test_conv_argument_orders(name, dims, types, concrete, nbias):
    cost = op_cost(name, dims, types, concrete)
    assert (cost.flops, cost.bytes) == (CONV_FLOPS, (CONV_IO + nbias) * 4)


# The ViT patch embedding of tracelens-*-Falconsai_nsfw_image_detection, verbatim: bf16
# x[4,3,224,224] w[768,3,16,16], stride 16, no padding: 14x14 patches.
VIT_FLOPS = 2 * 4 * 768 * 196 * 3 * 256  # 924,844,032
VIT_IO = 4 * 3 * 224 * 224 + 768 * 3 * 256 + 4 * 768 * 196


@pytest.mark.parametrize("name,dims,types,concrete,nbias", [
    ("aten::miopen_convolution", [[4, 3, 224, 224], [768, 3, 16, 16], [768]] + [[]] * 6,
     [BF16, BF16, BF16, SL, SL, SL, S, S, S],
     ["", "", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False"], 768),
    ("aten::cudnn_convolution", [[4, 3, 224, 224], [768, 3, 16, 16]] + [[]] * 7,
     [BF16, BF16, SL, SL, SL, S, S, S, S],
     ["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"], 0),
])
def test_conv_as_recorded_on_mi300_and_h100(name, dims, types, concrete, nbias):
    cost = op_cost(name, dims, types, concrete)
    assert (cost.flops, cost.bytes, cost.precision) == (VIT_FLOPS, (VIT_IO + nbias) * 2, "bf16")


def test_transposed_and_backward_convolutions():
    # conv_transpose2d x[1,4,8,8] w[4,2,3,3] stride 2 pad 1 output_padding 1: out [1,2,16,16]
    t = op_cost("aten::conv_transpose2d", [[1, 4, 8, 8], [4, 2, 3, 3], [], [], [], [], [], []],
                [F32, F32, "", SL, SL, SL, S, SL], ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]",
                                                    "1", "[1, 1]"])
    assert (t.flops, t.bytes) == (2 * 256 * 2 * 9, (256 + 72 + 512) * 4)
    # convolution_backward of the conv above, all three gradients: 2 x forward + bias grad
    b = op_cost("aten::convolution_backward",
                [[2, 16, 16, 16], [2, 3, 32, 32], [16, 3, 3, 3], [], [], [], [], [], [], [], []],
                [F32, F32, F32, SL, SL, SL, SL, S, SL, S, ""],
                ["", "", "", "[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                 "[True, True, True]"])
    assert (b.flops, b.bytes) == (2 * CONV_FLOPS + 2 * 16 * 256,
                                  (8192 + 6144 + 432 + 6144 + 432 + 16) * 4)


@pytest.mark.parametrize("name,dims,concrete,reason", [
    ("aten::miopen_convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"], "stride [0, 0]"),
    ("aten::conv2d", [[2, 3, 32, 32], [16, 4, 3, 3], [16], [], [], [], []],
     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"], "input channels 3"),
    ("aten::conv2d", [[2, 3, 2, 2], [16, 3, 3, 3], [16], [], [], [], []],
     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"], "output size 0"),
    ("aten::conv2d", [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "0"], "groups 0"),
    ("aten::mm", [[4, -3], [-3, 6]], None, "shape [4, -3]"),
])
def test_bad_shapes_degrade_to_a_note(name, dims, concrete, reason):
    types = [F32] * 3 + [SL] * 3 + [S]
    note = estimate(name, dims, types, concrete)
    assert isinstance(note, ShapeNote) and reason in note.reason, note
    assert op_cost(name, dims, types, concrete) is None
