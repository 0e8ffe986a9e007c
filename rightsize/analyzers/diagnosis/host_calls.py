"""Which library call owns the job's CPU time while the GPU waits, and whether it repeats per
item within a step.

Input: one rank's Python frames (Kineto ``python_function`` events, recorded with
``with_stack=True``), the intervals the GPU waits on the host (the ``host`` and ``dataloader``
shares) and the steps. Output: the time owned by each library (for the host share's split in
``host_work``), :class:`~rightsize.analyzers.document.diagnosis.HostCall` nodes (the calls
with the most of that time, how often each runs per step and what its repeats cost) and how
often the model's top module runs per step. Pure.

**Who owns an instant.** Frames nest on a thread; each instant belongs to the innermost frame
running (its self time). A frame's library is its own when its file is a data-processing
library's (``host_work.LIBRARIES``), else its caller's (a built-in such as
``<built-in function zoom_shift>``, or a standard-library helper, works for the library that
called it), else none (the user's code, PyTorch). So a SciPy resize inside a Hugging Face image
processor is SciPy's time, not the processor's: the processor is its *caller*. The *call* that
owns the time is where that library was entered: the outermost frame of the run of frames of
that library (``scipy/ndimage/_interpolation.py(...): zoom`` -> ``scipy.ndimage.zoom``).

**Repeats.** The model runs once per item when its top ``nn.Module`` frame is entered
:data:`MIN_REPEATS` or more times in the median step with the same call stack (the frame
names from the thread's root down to it). A call repeats per item when it is entered as many
times, with one call stack and durations within :data:`SAME_WORK_CV` of each other: the same
work once per item, around each run of the model (a zero-shot detection pipeline resized the
same image and ran the model once per text label). Doing it once, with the items batched
into one call, saves all but one of them: ``repeat_pct``. A call entered many times while the
model runs once is the batch's per-sample work (16 images decoded for one forward), not a
repeat: the traces cannot tell the same input from another of the same size.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import polars as pl

from rightsize.analyzers.document.diagnosis import HostCall
from rightsize.analyzers.metrics import intervals as iv
from rightsize.analyzers.metrics.per_step import exclusive_windows
from rightsize.analyzers.metrics.steps import Steps

MIN_REPEATS = 2  # entered this many times a step with the same stack: once per item
SAME_WORK_CV = 0.5  # ... with durations this close (standard deviation / mean): the same work
TOP_CALLS = 3
_FRAME = re.compile(r"^(?P<path>.+?\.py)\(\d+\): (?P<func>.+)$")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>$")
_MODULE = re.compile(r"^nn\.Module: (?P<name>.+?)(?:_\d+)?$")
_ROOTS = ("site-packages/", "dist-packages/")
# A call's library by its top package, as people name it (else the LIBRARIES label).
PACKAGES = {"scipy": "SciPy", "numpy": "NumPy", "PIL": "Pillow", "cv2": "OpenCV",
            "transformers": "Hugging Face transformers", "tokenizers": "Hugging Face tokenizers",
            "torchvision": "torchvision", "torchaudio": "torchaudio", "sklearn": "scikit-learn",
            "skimage": "scikit-image", "pandas": "pandas", "imageio": "imageio",
            "sentencepiece": "sentencepiece", "librosa": "librosa", "soundfile": "soundfile",
            "av": "PyAV", "decord": "decord", "torchcodec": "torchcodec"}


@dataclass(frozen=True, slots=True)
class Calls:
    """What :func:`library_calls` finds."""

    by_library: dict[str, iv.Intervals]  # self time of each library's frames, ns intervals
    calls: tuple[HostCall, ...]  # the calls with the most time while the GPU waits
    model: str = ""  # the model's top module, when it runs several times a step
    model_runs_per_step: float = 0.0


def call_name(frame: str) -> str:
    """``scipy/ndimage/_interpolation.py(711): zoom`` -> ``scipy.ndimage.zoom`` (private
    modules dropped, the path from the package root); a built-in keeps its name, less its
    address."""
    m = _FRAME.match(frame)
    if m is None:
        return _ADDRESS.sub(">", frame)
    path = m["path"]
    for root in _ROOTS:
        path = path.rsplit(root, 1)[-1]
    parts = [p for p in path.removesuffix(".py").split("/") if p]
    keep = parts[:1] + [p for p in parts[1:] if not p.startswith("_")]
    return ".".join([*keep, m["func"]])


def _walk(frames: pl.DataFrame, libraries: dict[str, str]) -> dict[str, np.ndarray]:
    """Per frame (rows sorted by thread, start, longest first): its library (index into
    ``libraries``, -1 none), the row where that library was entered, its parent row, its
    stack key and whether an enclosing frame is an nn.Module."""
    names = frames["name"].to_list()
    own = np.full(len(names), -1)
    for k, pattern in enumerate(libraries.values()):
        hit = frames["name"].str.contains(pattern).to_numpy()
        own = np.where((own < 0) & hit, k, own)
    lib, entry, parent = (np.full(len(names), -1) for _ in range(3))
    key = np.zeros(len(names), dtype=np.int64)
    in_module = np.zeros(len(names), dtype=bool)
    keys: dict[tuple[int, str], int] = {}
    ts, end = frames["ts_ns"].to_numpy(), frames["end_ns"].to_numpy()
    thread = frames["thread"].to_numpy()
    stack: list[int] = []
    for i, name in enumerate(names):
        while stack and (thread[stack[-1]] != thread[i] or end[stack[-1]] <= ts[i]):
            stack.pop()
        p = stack[-1] if stack else -1
        parent[i] = p
        lib[i] = own[i] if own[i] >= 0 else (lib[p] if p >= 0 else -1)
        entry[i] = (entry[p] if p >= 0 and lib[p] == lib[i] else i) if lib[i] >= 0 else -1
        key[i] = keys.setdefault((int(key[p]) if p >= 0 else -1, _ADDRESS.sub(">", name)),
                                 len(keys))
        in_module[i] = p >= 0 and (in_module[p] or _MODULE.match(names[p]) is not None)
        stack.append(i)
    return {"lib": lib, "entry": entry, "parent": parent, "key": key, "in_module": in_module}


def library_calls(frames: pl.DataFrame, libraries: dict[str, str], waiting: iv.Intervals,
                  steps: Steps | None) -> Calls:
    """See the module docstring; ``frames``: the trace's ``python_function`` rows (``ts_ns``,
    ``dur_ns``, ``name``, ``pid``, ``tid``); ``waiting``: where the GPU waits on the host."""
    if frames.height == 0:
        return Calls({}, ())
    f = (frames.with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns"),
                             thread=pl.concat_str([pl.col("pid").fill_null(""),
                                                   pl.col("tid").fill_null("")], separator="/"))
         .sort(["thread", "ts_ns", "end_ns"], descending=[False, False, True]))
    w = _walk(f, libraries)
    from rightsize.analyzers.diagnosis.shares import self_segments

    seg = self_segments(f.select("pid", "tid", "ts_ns", "dur_ns"))
    owner = w["lib"][seg["row"].to_numpy()]
    labels = list(libraries)
    by_library = {}
    for k, label in enumerate(labels):
        mine = seg.filter(pl.Series(owner == k))
        if mine.height:
            by_library[label] = iv.intersect(waiting, iv.union(iv.from_durations(
                mine["ts_ns"].to_numpy(), mine["dur_ns"].to_numpy())))
    model, runs = _model_runs(f, w, steps)
    calls = _calls(f, w, seg, waiting, steps, labels, runs)
    return Calls(by_library, calls, model, runs)


def _calls(f: pl.DataFrame, w: dict[str, np.ndarray], seg: pl.DataFrame, waiting: iv.Intervals,
           steps: Steps | None, labels: list[str], model_runs: float) -> tuple[HostCall, ...]:
    """The entry calls owning the most waiting time, with their repeats per step."""
    rows = seg["row"].to_numpy()
    entry_of = w["entry"][rows]
    owned = seg.with_columns(entry=pl.Series(entry_of)).filter(pl.col("entry") >= 0)
    if owned.height == 0:
        return ()
    step_ns = int(iv.total(iv.union(iv.of(steps.start_ns, steps.end_ns)))) \
        if steps is not None and steps.count else 0
    if step_ns <= 0:
        return ()
    names = f["name"].to_list()
    # time owned per call name (all its entries), while the GPU waits
    per_name: dict[str, list[int]] = defaultdict(list)
    for e in np.unique(owned["entry"].to_numpy()):
        per_name[call_name(names[e])].append(int(e))
    owned_ns = {}
    for name, entries in per_name.items():
        mine = owned.filter(pl.col("entry").is_in(entries))
        owned_ns[name] = iv.total(iv.intersect(waiting, iv.union(iv.from_durations(
            mine["ts_ns"].to_numpy(), mine["dur_ns"].to_numpy()))))
    top = sorted((n for n in owned_ns if owned_ns[n] > 0), key=lambda n: -owned_ns[n])
    out = []
    for name in top[:TOP_CALLS]:
        entries = per_name[name]
        first = entries[0]
        caller = _caller(w, names, first)
        per_step, repeat_ns = _repeats(f, w, entries, owned, waiting, steps, model_runs)
        library = PACKAGES.get(name.split(".")[0], labels[int(w["lib"][first])])
        out.append(HostCall(name, library, caller,
                            100.0 * owned_ns[name] / step_ns, per_step,
                            100.0 * repeat_ns / step_ns))
    return tuple(out)


def _caller(w: dict[str, np.ndarray], names: list[str], entry: int) -> str:
    """The nearest frame above a call that is not a built-in, by its call name ("" at the
    root)."""
    p = int(w["parent"][entry])
    while p >= 0 and not _FRAME.match(names[p]):
        p = int(w["parent"][p])
    return call_name(names[p]) if p >= 0 else ""


def _per_step(f: pl.DataFrame, rows: list[int], steps: Steps) -> np.ndarray:
    """The step (index) each row starts in, -1 outside every step."""
    lo, hi = exclusive_windows(steps)
    ts = f["ts_ns"].to_numpy()[rows]
    which = np.searchsorted(lo, ts, side="right") - 1
    ok = (which >= 0) & (ts < hi[np.clip(which, 0, None)])
    return np.where(ok, which, -1)


def _repeats(f: pl.DataFrame, w: dict[str, np.ndarray], entries: list[int],
             owned: pl.DataFrame, waiting: iv.Intervals, steps: Steps | None,
             model_runs: float) -> tuple[float, int]:
    """(entries per step with one stack: the median step's count, of the stack that repeats
    the most; the waiting time the steps spend in all but one of them, from the time each
    owns, when they are once per item: as many as the model's runs); no repeat: (count, 0)."""
    if steps is None or not steps.count:
        return 0.0, 0
    entries_a = np.asarray(entries)
    step_of = _per_step(f, entries, steps)
    keys = w["key"][entries_a]
    dur = f["dur_ns"].to_numpy()[entries_a]
    best: tuple[int, float] = (0, 0.0)
    for k in np.unique(keys):
        sel = keys == k
        counts = np.bincount(step_of[sel & (step_of >= 0)], minlength=steps.count)
        n = float(np.median(counts))
        d = dur[sel]
        repeat = 0
        if n >= MIN_REPEATS and n == model_runs and d.mean() > 0 \
                and d.std() / d.mean() <= SAME_WORK_CV:
            mine = owned.filter(pl.col("entry").is_in(entries_a[sel].tolist()))
            spent = iv.per_window(iv.intersect(waiting, iv.union(iv.from_durations(
                mine["ts_ns"].to_numpy(), mine["dur_ns"].to_numpy()))),
                *exclusive_windows(steps))
            repeat = int(sum(s * (c - 1) / c for s, c in zip(spent, counts, strict=True)
                             if c > 1))
        best = max(best, (repeat, n))
    return best[1], best[0]


def _model_runs(f: pl.DataFrame, w: dict[str, np.ndarray],
                steps: Steps | None) -> tuple[str, float]:
    """The model's top module and how often it runs in the median step, when more than once
    with one stack (the model run once per item); else ("", 0)."""
    if steps is None or not steps.count:
        return "", 0.0
    names = f["name"].to_list()
    tops = [i for i, n in enumerate(names) if not w["in_module"][i] and _MODULE.match(n)]
    if not tops:
        return "", 0.0
    step_of = _per_step(f, tops, steps)
    keys = w["key"][tops]
    best: tuple[float, str] = (0.0, "")
    for k in np.unique(keys):
        sel = keys == k
        n = float(np.median(np.bincount(step_of[sel & (step_of >= 0)], minlength=steps.count)))
        m = _MODULE.match(names[tops[int(np.nonzero(sel)[0][0])]])
        best = max(best, (n, m["name"] if m else ""))
    return (best[1], best[0]) if best[0] >= MIN_REPEATS else ("", 0.0)
