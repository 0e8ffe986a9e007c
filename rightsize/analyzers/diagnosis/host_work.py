"""The host share split in two: CPU work the job does, and framework/launch overhead.

Input: one rank's trace and its ``host`` share (GPU idle while the host runs). Output:
:class:`~rightsize.analyzers.document.diagnosis.HostWork`, or ``None`` when the host share is
empty. Pure.

Why: "the GPU waits for the host" has two remedies that do not mix. Framework overhead (Python
between ops, op dispatch, kernel launches) shrinks with torch.compile, CUDA graphs or larger
batches. The job's own CPU work (decoding, image and audio preprocessing, tokenization, metrics
on CPU tensors) shrinks with none of these: it moves off the critical path, into DataLoader
workers, or onto the GPU. A video model whose step is 57% Pillow decoding would otherwise be told
to use CUDA graphs.

**CPU work** is the host time, inside the host share, covered by

* a Python frame of a data-processing library (:data:`LIBRARIES`, matched on the profiler's frame
  names: ``PIL/Image.py(1017): convert``, ``<built-in method decode of ImagingDecoder ...>``):
  only recorded with ``with_stack=True`` (``rightsize run --with-stack``);
* a PyTorch op that launched no device work: an op of at least :data:`MIN_CPU_OP_NS` with no
  CUDA/HIP runtime call inside it on its thread (an op on CPU tensors: normalizing an image,
  a metric, a CPU loss), whatever the stack recording.

**Annotated ranges** (``ranges_pct``): host time inside ``record_function``/NVTX ranges (not
the ones PyTorch records around its own Python, :data:`FRAMEWORK_RANGES`) with nothing finer
recorded there (nvFuser's JIT compilation, a user's ``record_function("decode")``
around pure Python): recorded work, named by its ranges, neither the job's movable CPU work nor
launch overhead.

**Framework overhead** is the rest of the host share. Without Python frames, library code that
calls no PyTorch op (Pillow decoding) leaves no trace at all: that time is in the ``idle`` share
("nothing recorded"), and the evidence says to record with ``--with-stack``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from rightsize.analyzers.diagnosis.capture import STARTUP_OPS
from rightsize.analyzers.diagnosis.host_calls import library_calls
from rightsize.analyzers.diagnosis.shares import annotated
from rightsize.analyzers.document.diagnosis import HostPart, HostWork
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.steps import Steps
from rightsize.traces.schema import Trace

# Library -> pattern on the profiler's Python frame names ("path/file.py(line): function" for
# Python code, "<built-in method NAME of TYPE object at 0x...>" for C functions).
LIBRARIES: dict[str, str] = {
    "Pillow (image decoding and transforms)":
        r"(?:^|/)PIL/|of Imaging(?:Core|Decoder|Encoder) object",
    "torchvision transforms and decoding": r"(?:^|/)torchvision/(?:transforms|io|datasets)/",
    "OpenCV": r"<built-in (?:function|method) \w+ of cv2|(?:^|/)cv2/",
    "video decoding (PyAV, decord, torchcodec)": r"(?:^|/)(?:av|decord|torchcodec)/|of av\.",
    "audio (torchaudio, librosa, soundfile)":
        r"(?:^|/)(?:torchaudio/(?:transforms|functional|io|_backend)|librosa|soundfile)/",
    "tokenization (tokenizers, sentencepiece, transformers)":
        r"(?:^|/)(?:tokenizers|sentencepiece)/|transformers/(?:tokenization_|models/\w+/"
        r"tokenization_)|of (?:tokenizers|sentencepiece)\.",
    "preprocessors (transformers image/feature processors)":
        r"transformers/(?:image_processing|image_transforms|feature_extraction|"
        r"processing_utils)|transformers/models/\w+/(?:image_processing|feature_extraction)",
    "NumPy, SciPy, pandas, scikit-learn":
        r"(?:^|/)(?:numpy|scipy|pandas|sklearn|skimage|imageio)/",
}
CPU_OPS_PART = "PyTorch ops on CPU tensors"
# Ranges PyTorch records by itself around its own Python (the optimizer's loop, DDP/FSDP,
# collectives, compiled regions): the time inside them with nothing finer is framework
# overhead, not work the user named.
FRAMEWORK_RANGES = (r"^(?:Optimizer\.\w+#|enumerate\(DataLoader\)|(?:DistributedDataParallel|"
                    r"FullyShardedDataParallel)\.|(?:nccl|gloo|mpi|ucc|xccl):|"
                    r"record_param_comms|autograd::|Torch-Compiled Region|CompiledFunction|"
                    r"## Call CompiledFxGraph)")
# Operators that compute (autograd nodes, optimizer and module annotations are framework)
OP_NAMESPACES = r"^(?:aten|prims|torchvision|torchaudio|quantized|_quantized)::"
# ...less those that only make tensor metadata or allocate: on a busy host they can take 20 us
# and more without computing anything (DDP's bucket views in the shared nccl_data trace: 477
# aten::narrow, 1281 aten::view at 24 us each; a first aten::empty that grows the allocator)
METADATA_OPS = (r"^aten::(?:_?(?:unsafe_)?view\w*|as_strided\w*|slice|narrow|select|expand\w*|"
                r"reshape|_reshape_alias|t|transpose|permute|squeeze\w*|unsqueeze\w*|detach\w*|"
                r"alias|lift\w*|unflatten\w*|flatten\w*|split\w*|chunk|unbind|unfold|"
                r"(?:new_)?empty\w*|resize_\w*|set_|record_stream|is_\w+|size|stride|numel|dim|"
                r"_has_compatible_shallow_copy_type|result_type|_nested\w*)$")
# An op this long with no runtime call inside runs on the CPU: dispatching an op that launches
# a kernel costs a few microseconds, and that op has a launch inside it anyway.
MIN_CPU_OP_NS = 20_000
TOP_NAMES = 3


def host_work(trace: Trace, host: iv.Intervals, step_ns: int, steps: Steps | None = None,
              loader: iv.Intervals | None = None) -> HostWork | None:
    """Split the ``host`` share (intervals) of a GPU trace; percentages of ``step_ns``. The
    library calls (``host_calls``) are looked for where the GPU waits on the host or on the
    data loader (``loader``: the data-loader share, whose ``__next__`` runs the Dataset's
    code in the main process when there are no workers)."""
    host_ns = iv.total(host)
    waiting = iv.union_all(host, loader) if loader is not None else host
    if iv.total(waiting) <= 0 or step_ns <= 0:
        return None
    ops = trace.cpu_ops.select("ts_ns", "dur_ns", "name", "cat", "pid", "tid")
    ranges_pct, ranges = _ranges(trace, host, ops, steps, step_ns)
    frames = ops.filter(pl.col("cat") == "python_function")
    found = library_calls(frames, LIBRARIES, waiting, steps)
    parts: list[tuple[str, iv.Intervals, pl.DataFrame]] = []
    for label, pattern in LIBRARIES.items():
        hit = frames.filter(pl.col("name").str.contains(pattern))
        if label in found.by_library:  # the time its frames own (innermost), not their spans
            parts.append((label, found.by_library[label], hit))
    cpu = _cpu_ops(ops.filter((pl.col("cat") == "cpu_op")
                              & pl.col("name").str.contains(OP_NAMESPACES)
                              & ~pl.col("name").str.contains(METADATA_OPS)), trace.runtime)
    if cpu.height:
        parts.append((CPU_OPS_PART, _span(cpu), cpu))
    out: list[HostPart] = []
    covered = iv.empty()
    for label, spans, rows in parts:  # each part counts only time no earlier part claimed
        own = iv.subtract(iv.intersect(host, spans), covered)
        ns = iv.total(own)
        if ns <= 0:
            continue
        covered = iv.union_all(covered, own)
        out.append(HostPart(label, 100.0 * ns / step_ns, _top(rows, host)))
    cpu_ns = iv.total(covered)
    out.sort(key=lambda p: -p.pct)
    ranges_pct = min(ranges_pct, 100.0 * (host_ns - cpu_ns) / step_ns)
    return HostWork(cpu_work_pct=100.0 * cpu_ns / step_ns,
                    framework_pct=100.0 * (host_ns - cpu_ns) / step_ns - ranges_pct,
                    parts=tuple(out), python_frames=frames.height > 0,
                    ranges_pct=ranges_pct, ranges=ranges, calls=found.calls,
                    model=found.model, model_runs_per_step=found.model_runs_per_step)


def _ranges(trace: Trace, host: iv.Intervals, ops: pl.DataFrame, steps: Steps | None,
            step_ns: int) -> tuple[float, tuple[str, ...]]:
    """Host time inside annotated ranges (``record_function``, NVTX) with nothing else
    recorded there (no op, Python function or runtime call), % of the step, and the ranges
    with the most of it: the work those names say, which the trace shows no finer."""
    ann = annotated(trace, steps).filter(~pl.col("name").str.contains(FRAMEWORK_RANGES))
    if ann.height == 0:
        return 0.0, ()
    other = iv.union(iv.from_durations(
        *(pl.concat([ops.filter(pl.col("cat").is_in(["cpu_op", "python_function"]))
                     .select("ts_ns", "dur_ns"), trace.runtime.select("ts_ns", "dur_ns")])
          [c].to_numpy() for c in ("ts_ns", "dur_ns"))))
    only = iv.subtract(iv.intersect(host, iv.union(iv.from_durations(
        ann["ts_ns"].to_numpy(), ann["dur_ns"].to_numpy()))), other)
    ns = iv.total(only)
    return (100.0 * ns / step_ns, _top(ann, only)) if ns > 0 else (0.0, ())


def _span(df: pl.DataFrame) -> iv.Intervals:
    return iv.union(iv.from_durations(df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()))


def _cpu_ops(ops: pl.DataFrame, runtime: pl.DataFrame) -> pl.DataFrame:
    """Ops of :data:`MIN_CPU_OP_NS` or more with no runtime call starting inside them (nested
    ops are kept: the caller merges their spans). A call on another thread inside an op's span
    counts too (a lean read carries no runtime thread ids): CPU work is a lower bound."""
    long = ops.filter(pl.col("dur_ns") >= MIN_CPU_OP_NS)
    if long.height == 0 or runtime.height == 0:
        return long
    ts = np.sort(runtime["ts_ns"].to_numpy())
    start = long["ts_ns"].to_numpy()
    end = start + long["dur_ns"].to_numpy()
    inside = np.searchsorted(ts, end, side="left") - np.searchsorted(ts, start, side="left")
    return long.filter(pl.Series(inside == 0))


_ADDRESS = re.compile(r" at 0x[0-9a-f]+>$")


def _top(rows: pl.DataFrame, host: iv.Intervals) -> tuple[str, ...]:
    """The names with the most time in the host share (an address dropped from built-ins)."""
    hs, he = host
    if hs.size == 0:
        return ()
    s = rows["ts_ns"].to_numpy()
    e = s + rows["dur_ns"].to_numpy()
    # overlap of each row with the (sorted, disjoint) host intervals, summed per name
    cum = np.concatenate(([0], np.cumsum(he - hs)))

    def covered_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(hs, t, side="right")  # intervals starting at or before t
        last = np.clip(k - 1, 0, None)
        part = np.where(k > 0, np.clip(t - hs[last], 0, he[last] - hs[last]), 0)
        return cum[last] * (k > 0) + part

    overlap = covered_until(e) - covered_until(s)
    names = [_ADDRESS.sub(">", n) for n in rows["name"].to_list()]
    by = (pl.DataFrame({"name": names, "ns": overlap}).group_by("name").agg(pl.col("ns").sum())
          .filter(pl.col("ns") > 0).sort(["ns", "name"], descending=[True, False]))
    return tuple(by["name"].head(TOP_NAMES).to_list())


def host_parts(host: HostWork | None) -> str:
    """The job's CPU work by library, in words, for a rule's detail."""
    if host is None or not host.parts:
        return "no library named"
    return "; ".join(f"{p.name} {p.pct:.1f}%" + (f": {', '.join(p.top)}" if p.top else "")
                     for p in host.parts)


def named_stall(host: HostWork | None, step_ms: float) -> dict[str, Any]:
    """The part of the step the diagnosis can name where the GPU waits (ms), and what it is
    with what to do: ``sizing.Workload``'s ``named_stall_ms`` and ``named_stall`` (the
    sizing's reason says it when it is most of the wait): a library call repeated per item,
    else the call owning the most CPU time, or annotated ranges, whichever holds more; 0
    and "" when nothing is named."""
    named: list[tuple[float, str]] = []
    if host is not None and host.ranges_pct:
        startup = any(re.search(STARTUP_OPS, n) for n in host.ranges)
        todo = ("JIT compilation, autotuning or warm-up, which a steady-state step does not"
                " repeat and a bigger GPU does not shrink: profile steps after warm-up before"
                " sizing" if startup else "host work a bigger GPU does not shrink: speed it up"
                " or move it off the step")
        said = (f"while the host is inside recorded ranges ({', '.join(host.ranges)}) with"
                f" nothing finer recorded: {todo}")
        named.append((host.ranges_pct, said))
    if host is not None and host.calls:
        c = next((c for c in host.calls if c.repeat_pct > 0), host.calls[0])
        where = f"{c.call} ({c.library}" + (f", called from {c.caller})" if c.caller else ")")
        named.append((c.pct, (
            f"while {where} runs {c.per_step:g} times in each step with the same call stack:"
            " the same work per item, which a bigger GPU does not shrink; do it once per step"
            " (preprocess once, batch the queries into one call"
            f"{repeat_words(host)['repeat_fix']})") if c.repeat_pct > 0 else (
            f"while the host runs {where}: the job's own CPU work, which a bigger GPU does"
            " not shrink; move it off the step (DataLoader workers, the GPU) or speed it up")))
    if not named:
        return {"named_stall_ms": 0.0, "named_stall": ""}
    pct, words = max(named, key=lambda x: x[0])
    return {"named_stall_ms": step_ms * pct / 100, "named_stall": words}


# What makes a repeated call cheaper besides doing it once, by where it runs (the call and its
# caller: a SciPy resize inside a Hugging Face image processor is the processor's to replace).
REPEAT_FIX = (
    (r"image_processing|image_transforms|feature_extraction|processing_utils",
     ("; load the fast image processor (AutoImageProcessor.from_pretrained(...,"
      " use_fast=True), or use_fast=True on the pipeline: torchvision on tensors, which also"
      " runs on the GPU with device='cuda')")),
    (r"tokeniz|sentencepiece", "; tokenize all the texts in one call of the fast tokenizer"),
    (r"^PIL\.", "; decode and transform each image once"),
)


def repeat_words(host: HostWork | None) -> dict[str, str]:
    """The repeated-work rule's words: which calls repeat, how often, from where
    (``repeated_calls``), and what else makes them cheaper (``repeat_fix``)."""
    rep = [c for c in (host.calls if host is not None else ()) if c.repeat_pct > 0]
    if host is None or not rep:
        return {"repeated_calls": "", "repeat_fix": ""}
    c = rep[0]
    called = f", called from {c.caller}" if c.caller else ""
    text = (f"{c.call} ({c.library}{called}) runs {c.per_step:g} times in each step with the "
            f"same call stack and like durations, {c.pct:.1f}% of the step")
    if rep[1:]:
        text += "; so do " + ", ".join(f"{o.call} ({o.per_step:g}x)" for o in rep[1:])
    if host.model:
        text += (f"; the model ({host.model}) runs {host.model_runs_per_step:g} times a step"
                 " as well")
    fix = next((words for pattern, words in REPEAT_FIX
                if re.search(pattern, c.call) or re.search(pattern, c.caller)), "")
    return {"repeated_calls": text, "repeat_fix": fix}
