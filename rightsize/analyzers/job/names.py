"""Collective types, their message sizes and nccl-tests' bus bandwidth factors.

Input: what a trace recorded about one collective call -- the ``Collective name`` arg, the host
op that launched it (``c10d::allreduce_``, ``nccl:all_reduce``), the kernel's name (NCCL
``ncclKernel_AllReduce_*``, ``ncclDevKernel_AllGather_*``; RCCL names every kernel
``ncclDevKernel_Generic``, which says nothing) and the sizes. Output: one of :data:`TYPES`, the
bytes nccl-tests would call the call's size, and the bus bandwidth factor.

Definitions (NVIDIA nccl-tests, doc/PERFORMANCE.md): ``algbw = size / time``; ``busbw = algbw x
factor`` with factor ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and
all-to-all, ``1`` for broadcast, reduce and send/receive, ``n`` ranks in the group. The size is
the largest buffer of one rank: the output of an all-gather (n x its input), the input of a
reduce-scatter, the whole buffer of an all-reduce, a broadcast or an all-to-all, which is
``max(in, out)`` elements x the element size in every case. Pure; no polars.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

ALLREDUCE, ALLGATHER, REDUCESCATTER = "allreduce", "allgather", "reducescatter"
BROADCAST, REDUCE, ALLTOALL, SENDRECV, BARRIER = ("broadcast", "reduce", "alltoall",
                                                  "sendrecv", "barrier")
UNKNOWN = "unknown"
TYPES = (ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE, ALLTOALL, SENDRECV, BARRIER,
         UNKNOWN)

BUS_FACTORS: dict[str, Callable[[int], float]] = {
    ALLREDUCE: lambda n: 2 * (n - 1) / n,
    ALLGATHER: lambda n: (n - 1) / n,
    REDUCESCATTER: lambda n: (n - 1) / n,
    ALLTOALL: lambda n: (n - 1) / n,
    BROADCAST: lambda n: 1.0,
    REDUCE: lambda n: 1.0,
    SENDRECV: lambda n: 1.0,
}

# Letters of a name -> type; the first that the name contains wins (all-reduce before reduce).
_BY_LETTERS = (("allreduce", ALLREDUCE), ("allgather", ALLGATHER),
               ("reducescatter", REDUCESCATTER), ("alltoall", ALLTOALL),
               ("broadcast", BROADCAST), ("sendrecv", SENDRECV), ("barrier", BARRIER),
               ("reduce", REDUCE), ("send", SENDRECV), ("recv", SENDRECV))
# Host ops that are not a transfer of their own: the wait on a work handle, the coalescing
# bracket (its kernels are the calls).
NOT_CALLS = frozenset({"wait", "coalescing", "startcoalescing", "endcoalescing"})
_KERNEL = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
COLLECTIVE_OP = r"^(c10d::|nccl:|gloo:)"  # host ops that launch one, by their names


def from_name(name: str | None) -> str | None:
    """The type of a "Collective name" arg or a host op's name (``c10d::_allgather_base_``,
    ``nccl:all_reduce``); None when it names none (``record_param_comms``, ``wait``)."""
    if not name:
        return None
    tail = name.split("::")[-1].split(":")[-1]
    letters = re.sub(r"[^a-z]", "", tail.lower())
    if not letters or letters in NOT_CALLS or letters == "recordparamcomms":
        return None
    return next((t for key, t in _BY_LETTERS if key in letters), None)


def from_kernel(name: str) -> str | None:
    """The type in an NCCL kernel's name (``ncclKernel_AllReduce_RING_LL_Sum_float``,
    ``ncclDevKernel_SendRecv``); None for RCCL's ``ncclDevKernel_Generic`` and other names."""
    m = _KERNEL.match(name)
    return from_name(m.group(1)) if m else None


def bus_factor(kind: str, n: int) -> float | None:
    """nccl-tests' busbw / algbw for ``kind`` over ``n`` ranks (None: no definition)."""
    f = BUS_FACTORS.get(kind)
    return f(n) if f is not None and n >= 1 else None


# c10 ScalarType names ("Collective name" args' dtype) and the profiler's "Input type" names.
DTYPE_BYTES = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "long": 8, "int": 4, "short": 2,
    "char": 1, "byte": 1, "bool": 1, "complexfloat": 8, "complexdouble": 16,
    "complexhalf": 4, "float8e4m3fn": 1, "float8e5m2": 1, "float8e4m3fnuz": 1,
    "float8e5m2fnuz": 1, "longint": 8, "signedchar": 1, "unsignedchar": 1, "shortint": 2,
    "c10half": 2, "c10bfloat16": 2, "c10complexfloat": 8, "c10complexdouble": 16,
    "c10float8e4m3fn": 1, "c10float8e5m2": 1, "uint8": 1, "int8": 1,
}


def dtype_bytes(dtype: str | None) -> int | None:
    if not dtype:
        return None
    return DTYPE_BYTES.get(re.sub(r"[^a-z0-9]", "", dtype.lower()))


def size_from_args(in_nelems: int | None, out_nelems: int | None,
                   dtype: str | None) -> int | None:
    """nccl-tests' size from the recorded element counts: the larger buffer x element size."""
    size = dtype_bytes(dtype)
    counts = [n for n in (in_nelems, out_nelems) if n is not None and n >= 0]
    return max(counts) * size if counts and size else None


def size_from_inputs(dims_json: str | None, types_json: str | None) -> int | None:
    """The largest tensor among a host op's recorded inputs (``Input Dims``/``Input type``),
    in bytes; None when no input has dims and a known dtype (a ``TensorList`` has no dims)."""
    if not dims_json or not types_json:
        return None
    try:
        dims, types = json.loads(dims_json), json.loads(types_json)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    best = None
    for shape, dtype in zip(dims, types, strict=False):
        size = dtype_bytes(dtype) if isinstance(dtype, str) else None
        if size is None or not isinstance(shape, list) or not shape \
                or not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        nbytes = math.prod(shape) * size
        best = nbytes if best is None else max(best, nbytes)
    return best


def group_ranks(text: str | None) -> tuple[int, ...] | None:
    """"Process Group Ranks" as recorded ("[0, 1, 2, 3]"); None when absent or empty."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, list) or not value or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in value):
        return None
    return tuple(value)
