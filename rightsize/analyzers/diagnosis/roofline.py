"""Op-level roofline: FLOPs and bytes of an op from its recorded shapes and dtypes.

Input: an op name as PyTorch records it (``aten::addmm``), its ``Input Dims`` (list of shapes),
``Input type`` (dtype names) and ``Concrete Inputs`` (scalar arguments as text), as
``torch.profiler(record_shapes=True)`` writes them, one entry per argument of the op's ATen
schema (tensors are read by their position in that schema, never by their order among the
tensors). Output: :class:`OpCost` (FLOPs, bytes moved
to and from memory assuming each tensor is read or written once) or ``None`` when the op is not
modelled or its shapes were not recorded; :func:`estimate` also returns a :class:`ShapeNote`
when the recorded shapes cannot describe the op (the op is left unclassified, with the note).
No value read from a trace is divided by without a check.

Conventions (forward op, multiply-add = 2 FLOPs):

* mm [M,K]x[K,N]: 2MKN FLOPs; bytes (MK + KN + MN) x element size.
* addmm bias + [M,K]x[K,N]: 2MKN + MN; bytes add the bias.
* bmm/baddbmm [B,M,K]x[B,K,N]: 2BMKN; bytes B(MK + KN + MN).
* linear x[..., K], W[N, K], b[N]: 2·rows·K·N (+ rows·N); bytes x + W + b + out.
* matmul: as mm/bmm after broadcasting the batch dimensions.
* convolutions (forward, transposed, backward): see ``rightsize.analyzers.diagnosis.conv``.
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

from rightsize.analyzers.diagnosis.conv import BACKWARD, SCHEMAS, BadShape, conv_cost

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
CONV = frozenset(SCHEMAS)
CONV_OPS = CONV | {BACKWARD}
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


@dataclass(frozen=True, slots=True)
class ShapeNote:
    """Why the roofline could not use an op's recorded shapes (the op stays unclassified)."""

    op: str
    reason: str


def _positional(dims: list[Any], types: list[Any]) -> dict[int, tuple[list[int], int]]:
    """Tensor arguments by position (ATen schema order): shape and element size, checked."""
    out = {}
    for i, shape in enumerate(dims):
        t = types[i] if i < len(types) else None
        if isinstance(shape, list) and shape and t in DTYPE_BYTES:
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                raise BadShape(f"argument {i} has shape {shape}")
            out[i] = (shape, DTYPE_BYTES[t])
    return out


def estimate(name: str, dims: list[Any] | None, types: list[Any] | None,
             concrete: list[Any] | None = None) -> OpCost | ShapeNote | None:
    """FLOPs and bytes of one op call; a :class:`ShapeNote` when its recorded shapes are
    inconsistent; None when the op is not modelled or carries no shapes."""
    if not dims or not types or not isinstance(dims, list) or not isinstance(types, list):
        return None
    try:
        tensors = _positional(dims, types)
        if not tensors:
            return None
        first = tensors[min(tensors)]
        size = first[1]
        precision = next((PRECISION_OF[t] for t in types
                          if isinstance(t, str) and t in PRECISION_OF), None)
        if name in MATMUL:
            flops, moved = _matmul(name, tensors, size)
        elif name in CONV_OPS:
            flops, moved = conv_cost(name, tensors, concrete or [])
        elif name in ATTENTION:
            flops, moved = _attention(tensors, size, name in SEQ_FIRST_ATTENTION)
        else:
            return _simple(name, list(tensors.values()), size, precision)
    except BadShape as e:
        return ShapeNote(name, str(e))
    return OpCost(flops, moved, precision)


def op_cost(name: str, dims: list[Any] | None, types: list[Any] | None,
            concrete: list[Any] | None = None) -> OpCost | None:
    """FLOPs and bytes of one op call, or None when not modelled / no usable shapes."""
    cost = estimate(name, dims, types, concrete)
    return cost if isinstance(cost, OpCost) else None


def _simple(name: str, tensors: list[tuple[list[int], int]], size: int,
            precision: str | None) -> OpCost | None:
    """Elementwise, reduction, norm, softmax, embedding and copy ops (no argument order)."""
    short = name.removeprefix("aten::")
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


# Argument positions (bias or None, a, b) of the matmul family, from their ATen schemas.
MATMUL_ARGS = {"aten::mm": (None, 0, 1), "aten::bmm": (None, 0, 1),
               "aten::matmul": (None, 0, 1), "aten::addmm": (0, 1, 2),
               "aten::_addmm_activation": (0, 1, 2), "aten::baddbmm": (0, 1, 2),
               "aten::_scaled_mm": (4, 0, 1)}


def _broadcast(a: list[int], b: list[int]) -> int:
    """Elements of the broadcast batch dims of a matmul's operands (checked)."""
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        raise BadShape(f"batch dims {a} and {b} do not broadcast")
    return math.prod(max(x, y) for x, y in zip(a, b, strict=True))


def _matmul(name: str, tensors: dict[int, tuple[list[int], int]],
            size: int) -> tuple[float, float]:
    if name == "aten::linear":
        (x, xb), (w, wb) = _arg(tensors, 0), _arg(tensors, 1)
        if len(w) != 2 or x[-1] != w[1]:
            raise BadShape(f"input {x} does not match weight {w}")
        rows, (n, k) = _numel(x[:-1]), w
        bias = tensors.get(2)
        b = _numel(bias[0]) if bias else 0
        flops = 2.0 * rows * k * n + (rows * n if b else 0)
        return flops, float(_numel(x) * xb + n * k * wb + b * size + rows * n * size)
    bias_at, ia, ib = MATMUL_ARGS[name]
    (a, ab), (b2, bb) = _arg(tensors, ia), _arg(tensors, ib)
    a = [1, *a] if len(a) == 1 else a  # matmul of a vector: [K] -> [1, K]
    b2 = [*b2, 1] if len(b2) == 1 else b2
    if a[-1] != b2[-2]:
        raise BadShape(f"inner dims differ: {a} x {b2}")
    m, k, n = a[-2], a[-1], b2[-1]
    batch = _broadcast(a[:-2], b2[:-2])
    bias = tensors.get(bias_at) if bias_at is not None else None
    nbias = _numel(bias[0]) if bias else 0
    flops = 2.0 * batch * m * k * n + (batch * m * n if bias else 0)
    moved = _numel(a) * ab + _numel(b2) * bb + (batch * m * n + nbias) * size
    return flops, float(moved)


def _arg(tensors: dict[int, tuple[list[int], int]], i: int) -> tuple[list[int], int]:
    if i not in tensors:
        raise BadShape(f"no tensor recorded at argument {i}")
    return tensors[i]


# These take (batch, seq, heads, head_dim); the public SDPA ops take (batch, heads, seq, dim).
SEQ_FIRST_ATTENTION = {"aten::_flash_attention_forward", "aten::_efficient_attention_forward"}


def _attention(tensors: dict[int, tuple[list[int], int]], size: int,
               seq_first: bool = False) -> tuple[float, float]:
    q, k, v = (_arg(tensors, i)[0] for i in range(3))
    if seq_first and len(q) == 4 and len(k) == 4 and len(v) == 4:
        q, k, v = ([t[0], t[2], t[1], t[3]] for t in (q, k, v))
    if len(q) < 3 or len(k) < 3 or len(v) < 3 or q[-1] != k[-1] or k[-2] != v[-2]:
        raise BadShape(f"query {q}, key {k}, value {v} do not form an attention")
    heads = _numel(q[:-2])
    lq, d, s, dv = q[-2], q[-1], k[-2], v[-1]
    flops = 2.0 * heads * lq * s * d + 2.0 * heads * lq * s * dv
    moved = _numel(q) + _numel(k) + _numel(v) + heads * lq * dv
    return flops, float(moved * size)


# Ops whose cost model makes them memory-bound whatever their shapes (for traces recorded
# without shapes, where only the name is known).
MEMORY_OPS = frozenset(
    NORM | SOFTMAX | REDUCE | COPY | EMBEDDING | {f"aten::{n}" for n in ELEMENTWISE}
)
