"""FLOPs and bytes of convolutions, reading each op's arguments by its ATen schema.

The convolution ops order their arguments differently (``aten::convolution`` has stride then
padding, ``aten::cudnn_convolution`` padding then stride and no bias, ``aten::miopen_convolution``
and ``aten::mkldnn_convolution`` bias then padding then stride), so each op name maps to the
positions of its arguments in ``Input Dims`` / ``Concrete Inputs`` (:data:`SCHEMAS`, copied from
``torch.ops.aten.<op>.default._schema``). Every value taken from the trace is checked before use;
an inconsistent shape raises :class:`BadShape` (the caller turns it into a note, never an error).

Conventions (multiply-add = 2 FLOPs):

* forward, x[N,C,*in], w[K,C/g,*k]: 2·N·K·prod(out)·(C/g)·prod(k), out = (in + 2p - d(k-1) - 1)
  // s + 1; bytes x + w + bias + out. Without Concrete Inputs: stride 1, no padding, dilation 1.
* transposed, w[C,K/g,*k]: 2·N·C·prod(in)·(K/g)·prod(k); out = (in-1)s - 2p + d(k-1) + op + 1.
* ``convolution_backward``: the forward FLOPs for each of grad-input and grad-weight asked for
  by ``output_mask``, plus one per grad-output element for grad-bias; bytes read grad-output,
  input and weight once and write the gradients asked for.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


class BadShape(ValueError):
    """Recorded arguments that cannot describe the op (the roofline leaves the op unclassified)."""


@dataclass(frozen=True, slots=True)
class ConvSchema:
    """Positions of a convolution op's arguments (None: the op has no such argument)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | None = None  # position of the ``transposed`` flag
    output_padding: int | None = None
    always_transposed: bool = False


_FORWARD = ConvSchema(bias=2, stride=3, padding=4, dilation=5, groups=6)
_CONVOLUTION = ConvSchema(bias=2, stride=3, padding=4, dilation=5, groups=8, transposed=6,
                          output_padding=7)
_BIAS_PAD_STRIDE = ConvSchema(bias=2, padding=3, stride=4, dilation=5, groups=6)
_TRANSPOSE = ConvSchema(bias=2, stride=3, padding=4, output_padding=5, groups=6, dilation=7,
                        always_transposed=True)
SCHEMAS: dict[str, ConvSchema] = {
    "aten::conv1d": _FORWARD, "aten::conv2d": _FORWARD, "aten::conv3d": _FORWARD,
    "aten::_convolution_mode": _FORWARD,
    "aten::convolution": _CONVOLUTION, "aten::_convolution": _CONVOLUTION,
    "aten::cudnn_convolution": ConvSchema(bias=None, padding=2, stride=3, dilation=4, groups=5),
    "aten::miopen_convolution": _BIAS_PAD_STRIDE,
    "aten::miopen_depthwise_convolution": _BIAS_PAD_STRIDE,
    "aten::mkldnn_convolution": _BIAS_PAD_STRIDE,
    "aten::conv_transpose1d": _TRANSPOSE, "aten::conv_transpose2d": _TRANSPOSE,
    "aten::conv_transpose3d": _TRANSPOSE,
    "aten::cudnn_convolution_transpose": ConvSchema(
        bias=None, padding=2, output_padding=3, stride=4, dilation=5, groups=6,
        always_transposed=True),
    "aten::miopen_convolution_transpose": ConvSchema(
        bias=2, padding=3, output_padding=4, stride=5, dilation=6, groups=7,
        always_transposed=True),
}
# convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
#                      transposed, output_padding, groups, output_mask)
BACKWARD = "aten::convolution_backward"
_BACKWARD = ConvSchema(bias=None, stride=4, padding=5, dilation=6, groups=9, transposed=7,
                       output_padding=8)
MASK_ARG = 10

Tensor = tuple[list[int], int]  # (shape, element size in bytes)


def _concrete(concrete: list[Any], i: int | None) -> Any:
    if i is None or i >= len(concrete):
        return None
    text = concrete[i]
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text.strip("'\"")  # a str argument: padding="same"


def _ints(value: Any, n: int, default: int, what: str, low: int) -> list[int]:
    """A recorded int or int list broadcast to ``n`` spatial dims, each checked >= ``low``."""
    if value is None:
        return [default] * n
    values = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(values, list) or not values or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise BadShape(f"{what} {value!r} is not a list of integers")
    if len(values) == 1:
        values = values * n
    if len(values) != n or min(values) < low:
        raise BadShape(f"{what} {value!r} does not fit {n} spatial dims (each >= {low})")
    return values


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _batched(x: list[int], w: list[int]) -> list[int]:
    if len(w) < 3:
        raise BadShape(f"weight {w} has no spatial dims")
    if len(x) == len(w) - 1:  # unbatched input [C, *in]
        return [1, *x]
    if len(x) != len(w):
        raise BadShape(f"input {x} and weight {w} differ in rank")
    return x


def _geometry(s: ConvSchema, x: list[int], w: list[int], concrete: list[Any],
              transposed: bool) -> tuple[list[int], int]:
    """Output spatial dims and groups, from the schema's arguments (all checked)."""
    n = len(w) - 2
    stride = _ints(_concrete(concrete, s.stride), n, 1, "stride", 1)
    dilation = _ints(_concrete(concrete, s.dilation), n, 1, "dilation", 1)
    pad_value = _concrete(concrete, s.padding)
    same = pad_value == "same"  # output as large as the input (PyTorch allows it at stride 1)
    if same and stride != [1] * n:
        raise BadShape(f"padding 'same' with stride {stride}")
    pad = [0] * n if pad_value in ("same", "valid") else _ints(pad_value, n, 0, "padding", 0)
    groups_value = _concrete(concrete, s.groups)
    cin = x[1]
    if groups_value is None:  # not recorded: as many groups as the channels imply
        per_group = w[0] if transposed else w[1]
        groups = cin // per_group if per_group and cin % per_group == 0 else 0
    else:
        groups = groups_value if isinstance(groups_value, int) else 0
    if groups < 1:
        raise BadShape(f"groups {groups_value!r} for input channels {cin} and weight {w}")
    if (cin != w[0]) if transposed else (cin != w[1] * groups):
        raise BadShape(f"input channels {cin} do not match weight {w} with {groups} groups")
    out = []
    extra = (_ints(_concrete(concrete, s.output_padding), n, 0, "output_padding", 0)
             if transposed else [0] * n)
    for i in range(n):
        span = dilation[i] * (w[2 + i] - 1)
        if same:
            o = x[2 + i]
        elif transposed:
            o = (x[2 + i] - 1) * stride[i] - 2 * pad[i] + span + extra[i] + 1
        else:
            o = (x[2 + i] + 2 * pad[i] - span - 1) // stride[i] + 1
        if o < 1:
            raise BadShape(f"output size {o} from input {x}, weight {w}, stride {stride}, "
                           f"padding {pad}, dilation {dilation}")
        out.append(o)
    return out, groups


def _tensor(tensors: dict[int, Tensor], i: int | None, what: str) -> Tensor:
    if i is None or i not in tensors:
        raise BadShape(f"no {what} tensor recorded at argument {i}")
    return tensors[i]


def conv_cost(name: str, tensors: dict[int, Tensor],
              concrete: list[Any]) -> tuple[float, float]:
    """(FLOPs, bytes) of one convolution call; ``tensors`` by argument position."""
    if name == BACKWARD:
        return _backward(tensors, concrete)
    s = SCHEMAS[name]
    (x0, xb), (w, wb) = _tensor(tensors, 0, "input"), _tensor(tensors, 1, "weight")
    transposed = s.always_transposed or _flag(_concrete(concrete, s.transposed), False)
    x = _batched(x0, w)
    out_sp, groups = _geometry(s, x, w, concrete, transposed)
    kernel = math.prod(w[2:])
    if transposed:
        flops = 2.0 * math.prod(x) * w[1] * kernel
        out = x[0] * w[1] * groups * math.prod(out_sp)
    else:
        out = x[0] * w[0] * math.prod(out_sp)
        flops = 2.0 * out * w[1] * kernel
    bias = tensors.get(s.bias) if s.bias is not None else None
    bias_bytes = math.prod(bias[0]) * bias[1] if bias else 0
    return flops, float(math.prod(x) * xb + math.prod(w) * wb + bias_bytes + out * xb)


def _backward(tensors: dict[int, Tensor], concrete: list[Any]) -> tuple[float, float]:
    (g, gb), (x0, xb) = _tensor(tensors, 0, "grad_output"), _tensor(tensors, 1, "input")
    w, wb = _tensor(tensors, 2, "weight")
    transposed = _flag(_concrete(concrete, _BACKWARD.transposed), False)
    x = _batched(x0, w)
    out_sp, groups = _geometry(_BACKWARD, x, w, concrete, transposed)
    channels = w[1] * groups if transposed else w[0]
    expected = [x[0], channels, *out_sp]
    grad = _batched(g, w)
    if grad != expected:
        raise BadShape(f"grad_output {g} does not match the forward output {expected}")
    mask = _concrete(concrete, MASK_ARG)
    if not (isinstance(mask, list) and len(mask) == 3 and all(isinstance(m, bool) for m in mask)):
        mask = [True, True, True]
    kernel = math.prod(w[2:])
    forward = 2.0 * math.prod(x if transposed else grad) * w[1] * kernel
    flops = forward * (int(mask[0]) + int(mask[1])) + (math.prod(grad) if mask[2] else 0)
    read = math.prod(grad) * gb + math.prod(x) * xb + math.prod(w) * wb
    written = (math.prod(x) * xb if mask[0] else 0) + (math.prod(w) * wb if mask[1] else 0) \
        + (channels * gb if mask[2] else 0)
    return flops, float(read + written)
