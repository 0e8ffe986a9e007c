"""Op-level roofline: FLOPs and bytes of an op from its recorded shapes and dtypes.

Input: an op name as PyTorch records it (``aten::addmm``), its ``Input Dims`` (list of shapes),
``Input type`` (dtype names) and ``Concrete Inputs`` (scalar arguments as text), as
``torch.profiler(record_shapes=True)`` writes them. Output: :class:`OpCost` (FLOPs, bytes moved
to and from memory assuming each tensor is read or written once) or ``None`` when the op is not
modelled or its shapes were not recorded.

Conventions (forward op, multiply-add = 2 FLOPs):

* mm [M,K]x[K,N]: 2MKN FLOPs; bytes (MK + KN + MN) x element size.
* addmm bias + [M,K]x[K,N]: 2MKN + MN; bytes add the bias.
* bmm/baddbmm [B,M,K]x[B,K,N]: 2BMKN; bytes B(MK + KN + MN).
* linear x[..., K], W[N, K], b[N]: 2·rows·K·N (+ rows·N); bytes x + W + b + out.
* matmul: as mm/bmm after broadcasting the batch dimensions.
* convolution x[N,C,H,W], w[K,C/g,R,S]: 2·N·K·Ho·Wo·(C/g)·R·S, with Ho/Wo from stride, padding
  and dilation in Concrete Inputs (stride 1, no padding when absent); bytes x + w + out.
* scaled dot-product attention q[B,H,L,D], k[B,H,S,D], v[B,H,S,Dv]: 2BHLSD + 2BHLSDv; bytes
  q + k + v + out (the fused kernels never write the L x S scores).
* elementwise: 1 FLOP per output element; bytes = tensor inputs + output.
* reductions: 1 FLOP per input element; bytes = input + output.
* norms (layer/batch/group/RMS): 5 FLOPs per element (mean, variance, scale, shift); bytes
  input + output + parameters.
* softmax: 5 FLOPs per element; bytes input + output.
* embedding: 0 FLOPs; bytes indices + gathered rows (output) x 2 (read and write).
* copies (copy_, clone, to, contiguous): 0 FLOPs; bytes = read + write of the tensor.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# Element sizes of the dtype names PyTorch records in "Input type".
DTYPE_BYTES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8,
    "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
}
PRECISION_OF = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
                "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8",
                "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
                "signed char": "int8"}

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
          "aten::linear", "aten::_scaled_mm"}
CONV = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
        "aten::_convolution", "aten::cudnn_convolution", "aten::mkldnn_convolution",
        "aten::miopen_convolution", "aten::_convolution_mode"}
ATTENTION = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
             "aten::_efficient_attention_forward",
             "aten::_scaled_dot_product_flash_attention_for_cpu"}
NORM = {"aten::layer_norm", "aten::native_layer_norm", "aten::batch_norm",
        "aten::native_batch_norm", "aten::_batch_norm_impl_index", "aten::cudnn_batch_norm",
        "aten::group_norm", "aten::native_group_norm", "aten::rms_norm", "aten::_fused_rms_norm"}
SOFTMAX = {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
           "aten::_safe_softmax"}
REDUCE = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min",
          "aten::norm", "aten::linalg_vector_norm", "aten::var", "aten::std", "aten::prod",
          "aten::argmax", "aten::argmin", "aten::all", "aten::any", "aten::cumsum"}
COPY = {"aten::copy_", "aten::clone", "aten::to", "aten::_to_copy", "aten::contiguous",
        "aten::pin_memory", "aten::_pin_memory", "aten::cat", "aten::stack", "aten::index_select",
        "aten::gather", "aten::scatter", "aten::index", "aten::index_put_"}
EMBEDDING = {"aten::embedding", "aten::embedding_dense_backward", "aten::embedding_backward"}
ELEMENTWISE = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "relu", "relu_", "gelu", "silu",
    "silu_", "sigmoid", "tanh", "exp", "log", "neg", "pow", "rsqrt", "sqrt", "sin", "cos",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
    "tanh_backward", "where", "masked_fill", "masked_fill_", "clamp", "clamp_", "fill_",
    "zero_", "addcmul_", "addcdiv_", "lerp_", "abs", "square", "reciprocal", "eq", "ne", "lt",
    "gt", "le", "ge", "dropout", "native_dropout", "hardtanh", "leaky_relu", "elu", "_foreach_add_",
    "_foreach_mul_", "_foreach_addcmul_", "_foreach_addcdiv_", "_foreach_lerp_", "_foreach_sqrt",
    "_foreach_div_", "normal_", "uniform_", "bernoulli_", "randn", "rand",
}


@dataclass(frozen=True, slots=True)
class OpCost:
    flops: float
    bytes: float
    precision: str | None  # of the first floating input: fp32, bf16, fp16, fp8, ...

    @property
    def intensity(self) -> float:
        """FLOPs per byte (arithmetic intensity)."""
        return self.flops / self.bytes if self.bytes > 0 else math.inf


def parse_json_list(text: str | None) -> list[Any] | None:
    """Kineto's list-valued args arrive as JSON text (see rightsize.traces.kineto_frames)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 0


def _tensors(dims: list[Any], types: list[Any]) -> list[tuple[list[int], int]]:
    """(shape, element size) of the tensor arguments (non-empty shapes with a known dtype)."""
    out = []
    for i, shape in enumerate(dims):
        t = types[i] if i < len(types) else None
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape) \
                and t in DTYPE_BYTES:
            out.append((shape, DTYPE_BYTES[t]))
    return out


def _ints(text: Any, n: int, default: int) -> list[int]:
    """"[2, 2]" or "2" -> [2, 2]; missing -> [default] * n."""
    if isinstance(text, str) and text:
        try:
            value = json.loads(text)
        except ValueError:
            return [default] * n
        if isinstance(value, int):
            return [value] * n
        if isinstance(value, list) and all(isinstance(v, int) for v in value) and value:
            return (value * n)[:n] if len(value) == 1 else value[:n]
    return [default] * n


def op_cost(name: str, dims: list[Any] | None, types: list[Any] | None,
            concrete: list[Any] | None = None) -> OpCost | None:
    """FLOPs and bytes of one op call, or None when not modelled / no shapes."""
    if not dims or not types:
        return None
    tensors = _tensors(dims, types)
    if not tensors:
        return None
    precision = next((PRECISION_OF[t] for t in types if t in PRECISION_OF), None)
    size = tensors[0][1]
    short = name.removeprefix("aten::")
    if name in MATMUL:
        return _matmul(name, tensors, size, precision)
    if name in CONV:
        return _conv(tensors, size, precision, concrete or [])
    if name in ATTENTION:
        return _attention(tensors, size, precision, name in SEQ_FIRST_ATTENTION)
    io = sum(_numel(s) * b for s, b in tensors)
    out = _numel(tensors[0][0])
    if name in NORM:
        return OpCost(5.0 * out, float(io + out * size), precision)
    if name in SOFTMAX:
        return OpCost(5.0 * out, float(2 * out * size), precision)
    if name in REDUCE:
        return OpCost(float(out), float(io + size), precision)  # output is small
    if name in EMBEDDING:
        weight, idx = tensors[0], (tensors[1] if len(tensors) > 1 else ([1], 8))
        rows = _numel(idx[0])
        row = weight[0][-1] if weight[0] else 0
        return OpCost(0.0, float(rows * idx[1] + 2 * rows * row * weight[1]), precision)
    if name in COPY:
        return OpCost(0.0, float(2 * out * size), precision)
    if short in ELEMENTWISE:
        largest = max(_numel(s) for s, _ in tensors)
        return OpCost(float(largest), float(io + largest * size), precision)
    return None


def _matmul(name: str, tensors: list[tuple[list[int], int]], size: int,
            precision: str | None) -> OpCost | None:
    shapes = [s for s, _ in tensors]
    bias = 0
    if name == "aten::addmm" and len(shapes) >= 3 or name == "aten::baddbmm" and len(shapes) >= 3:
        bias, shapes = _numel(shapes[0]), shapes[1:3]
    elif name == "aten::linear" and len(shapes) >= 2:
        x, w = shapes[0], shapes[1]
        if len(w) != 2 or x[-1] != w[1]:
            return None
        rows = _numel(x[:-1])
        b = _numel(shapes[2]) if len(shapes) > 2 else 0
        n, k = w
        flops = 2.0 * rows * k * n + (rows * n if b else 0)
        return OpCost(flops, float((_numel(x) + n * k + b + rows * n) * size), precision)
    if len(shapes) < 2:
        return None
    a, b2 = shapes[0], shapes[1]
    if len(a) < 2 or len(b2) < 2 or a[-1] != b2[-2]:
        return None
    m, k, n = a[-2], a[-1], b2[-1]
    batch = max(_numel(a[:-2]) if len(a) > 2 else 1, _numel(b2[:-2]) if len(b2) > 2 else 1)
    flops = 2.0 * batch * m * k * n + (batch * m * n if bias else 0)
    moved = _numel(a) + _numel(b2) + batch * m * n + bias
    return OpCost(flops, float(moved * size), precision)


def _conv(tensors: list[tuple[list[int], int]], size: int, precision: str | None,
          concrete: list[Any]) -> OpCost | None:
    if len(tensors) < 2:
        return None
    x, w = tensors[0][0], tensors[1][0]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return None
    n, k = x[0], w[0]
    cin_per_group = w[1]
    # Concrete Inputs of convolution ops: input, weight, bias, stride, padding, dilation, ...
    stride = _ints(concrete[3] if len(concrete) > 3 else None, spatial, 1)
    padding = _ints(concrete[4] if len(concrete) > 4 else None, spatial, 0)
    dilation = _ints(concrete[5] if len(concrete) > 5 else None, spatial, 1)
    out_sp = []
    for i in range(spatial):
        eff = dilation[i] * (w[2 + i] - 1) + 1
        out_sp.append(max((x[2 + i] + 2 * padding[i] - eff) // stride[i] + 1, 1))
    out = n * k * _numel(out_sp)
    flops = 2.0 * out * cin_per_group * _numel(w[2:])
    return OpCost(flops, float((_numel(x) + _numel(w) + out) * size), precision)


# These take (batch, seq, heads, head_dim); the public SDPA ops take (batch, heads, seq, dim).
SEQ_FIRST_ATTENTION = {"aten::_flash_attention_forward", "aten::_efficient_attention_forward"}


def _attention(tensors: list[tuple[list[int], int]], size: int,
               precision: str | None, seq_first: bool = False) -> OpCost | None:
    if len(tensors) < 3:
        return None
    q, k, v = (t[0] for t in tensors[:3])
    if seq_first and len(q) == 4 and len(k) == 4 and len(v) == 4:
        q, k, v = ([t[0], t[2], t[1], t[3]] for t in (q, k, v))
    if len(q) < 3 or len(k) < 3 or len(v) < 3:
        return None
    heads = _numel(q[:-2])
    lq, d, s, dv = q[-2], q[-1], k[-2], v[-1]
    flops = 2.0 * heads * lq * s * d + 2.0 * heads * lq * s * dv
    moved = _numel(q) + _numel(k) + _numel(v) + heads * lq * dv
    return OpCost(flops, float(moved * size), precision)


# Ops whose cost model makes them memory-bound whatever their shapes (for traces recorded
# without shapes, where only the name is known).
MEMORY_OPS = frozenset(
    NORM | SOFTMAX | REDUCE | COPY | EMBEDDING | {f"aten::{n}" for n in ELEMENTWISE}
)
