"""FLOPs and bytes of each op type, against hand-computed values."""

from __future__ import annotations

import pytest

from rightsize.analyzers.diagnosis.roofline import op_cost

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
     (6144 + 432 + 2 * 16 * 256) * 4),
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
