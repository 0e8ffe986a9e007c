"""A Kineto trace of a Hugging Face zero-shot object detection pipeline (OWLv2), built as
torch writes it with ``with_stack=True``: the frame names and file paths are those of
transformers' pipeline and OWLv2 image processor and of SciPy's ``ndimage`` (line numbers as
in transformers 4.46 and SciPy 1.14; rightsize reads the path and the function, not the line).

The job: ``for out in pipe(images, candidate_labels=LABELS)`` with the profiler stepped once per
image. ``ZeroShotObjectDetectionPipeline.preprocess`` yields one chunk per label and, for each,
tokenizes the label and runs the image processor on the *same* image
(``Owlv2ImageProcessor.resize``: ``scipy.ndimage.gaussian_filter`` then ``scipy.ndimage.zoom``);
the chunks come through a ``DataLoader`` with no workers, so that work runs inside
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``; the model then runs once per
chunk (``nn.Module: Owlv2ForObjectDetection_0``), its 960x960 pixel values copied from pageable
memory first and its outputs copied back (the host blocks until the kernels end).

Per label (ms from its start): the loader's ``__next__`` 0-58.5 (tokenizer 0.2-2.2; image
processor 2.3-58.3: to_numpy_array 1, rescale 3, pad 4 of which numpy.pad 3.8, resize
10.8-55.0 with gaussian_filter 11.0-19.0 and zoom 19.1-53.1, normalize 55.1-58.1); the
forward 58.6-75.6 (copy in 58.7-59.9, 30 kernels of 0.5 ms from 60.1, copy out until 75.3).
A step is five labels (378 ms) and a 5 ms postprocess: 383 ms.
"""

from __future__ import annotations

from pathlib import Path

from tests.tracebuilder import H100, TraceBuilder

LABELS = ("a cat", "a dog", "a remote control", "a couch", "a person")
LABEL_MS, POST_MS = 75.6, 5.0
STEP_MS = len(LABELS) * LABEL_MS + POST_MS  # 383 ms
PIPE = "transformers/pipelines"
OWL = "transformers/models/owlv2/image_processing_owlv2.py"
NDI = "scipy/ndimage"
KERNEL = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


class _Frames:
    """Python frames as torch's Python tracer writes them: nested ``python_function``
    events with ``Python id`` and ``Python parent id``."""

    def __init__(self, b: TraceBuilder) -> None:
        self.b, self.next_id = b, 1

    def frame(self, name: str, start_ms: float, dur_ms: float, parent: int | None) -> int:
        pid = self.next_id
        self.next_id += 1
        self.b.x("python_function", name, start_ms * 1000, dur_ms * 1000,
                 **{"Python id": pid, "Python parent id": parent})
        return pid


def _resize(f: _Frames, t: float, parent: int) -> None:
    r = f.frame(f"{OWL}(359): resize", t + 10.8, 44.2, parent)
    f.frame("transformers/image_transforms.py(59): to_channel_dimension_format",
            t + 10.85, 0.1, r)
    g = f.frame(f"{NDI}/_filters.py(288): gaussian_filter", t + 11.0, 8.0, r)
    for axis, start in enumerate((11.1, 15.0)):
        g1 = f.frame(f"{NDI}/_filters.py(186): gaussian_filter1d", t + start, 3.8, g)
        c = f.frame(f"{NDI}/_filters.py(87): correlate1d", t + start + 0.1, 3.6, g1)
        f.frame("<built-in function correlate1d>", t + start + 0.2, 3.4, c)
        del axis
    z = f.frame(f"{NDI}/_interpolation.py(711): zoom", t + 19.1, 34.0, r)
    f.frame("<built-in function zoom_shift>", t + 19.2, 33.8, z)
    c = f.frame(f"{OWL}(183): _clip_warp_output", t + 53.2, 1.7, r)
    f.frame("numpy/core/fromnumeric.py(2177): clip", t + 53.5, 1.3, c)


def _image_processor(f: _Frames, t: float, parent: int) -> None:
    call = f.frame("transformers/image_processing_utils.py(41): __call__", t + 2.3, 56.0, parent)
    pre = f.frame(f"{OWL}(415): preprocess", t + 2.4, 55.8, call)
    f.frame("transformers/image_utils.py(201): to_numpy_array", t + 2.5, 1.0, pre)
    f.frame("transformers/image_transforms.py(95): rescale", t + 3.6, 3.0, pre)
    pad = f.frame(f"{OWL}(318): pad", t + 6.7, 4.0, pre)
    f.frame("numpy/lib/arraypad.py(533): pad", t + 6.8, 3.8, pad)
    _resize(f, t, pre)
    f.frame("transformers/image_transforms.py(364): normalize", t + 55.1, 3.0, pre)


def _label(b: TraceBuilder, f: _Frames, t: float, root: int, corr: int) -> int:
    """One chunk: the loader's __next__ (preprocessing), then the model's forward."""
    pack = f.frame(f"{PIPE}/pt_utils.py(124): __next__", t, LABEL_MS, root)
    b.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        t * 1000, 58.5 * 1000)
    nxt = f.frame("torch/utils/data/dataloader.py(701): __next__", t, 58.5, pack)
    data = f.frame("torch/utils/data/dataloader.py(757): _next_data", t + 0.05, 58.4, nxt)
    fetch = f.frame("torch/utils/data/_utils/fetch.py(33): fetch", t + 0.1, 58.3, data)
    chunk = f.frame(f"{PIPE}/pt_utils.py(241): __next__", t + 0.12, 58.26, fetch)
    pre = f.frame(f"{PIPE}/zero_shot_object_detection.py(152): preprocess", t + 0.15, 58.2,
                  chunk)
    f.frame("transformers/tokenization_utils_base.py(2855): __call__", t + 0.2, 2.0, pre)
    _image_processor(f, t, pre)
    fwd = f.frame(f"{PIPE}/base.py(1164): forward", t + 58.6, 17.0, pack)
    ens = f.frame(f"{PIPE}/base.py(1072): _ensure_tensor_on_device", t + 58.65, 1.3, fwd)
    b.op("aten::to", (t + 58.7) * 1000, 1.2 * 1000, ext=corr)
    b.launch("cudaMemcpyAsync", (t + 58.7) * 1000, 1.2 * 1000, corr=corr, ext=corr)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", (t + 58.75) * 1000, 1.1 * 1000, corr=corr,
             nbytes=960 * 960 * 3 * 4)
    del ens
    model = f.frame("nn.Module: Owlv2ForObjectDetection_0", t + 60.0, 1.5, fwd)
    for k in range(30):
        c = corr + 1 + k
        b.op("aten::linear", (t + 60.0 + 0.05 * k) * 1000, 40, ext=c)
        b.launch("cudaLaunchKernel", (t + 60.0 + 0.05 * k) * 1000, 30, corr=c, ext=c)
        b.kernel(KERNEL, (t + 60.1 + 0.5 * k) * 1000, 500, corr=c, ext=c)
    del model
    out = corr + 31
    b.op("aten::to", (t + 61.6) * 1000, 13.7 * 1000, ext=out)
    b.launch("cudaMemcpyAsync", (t + 61.6) * 1000, 13.7 * 1000, corr=out, ext=out)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", (t + 75.15) * 1000, 0.1 * 1000, corr=out,
             nbytes=4 * 3600 * 4)
    return corr + 32


def zero_shot_trace(path: Path, steps: int = 3) -> Path:
    """Write the trace (see the module docstring) of ``steps`` images to ``path``."""
    b = TraceBuilder(devices=[H100])
    f = _Frames(b)
    root = f.frame("detect.py(18): <module>", 0, steps * STEP_MS + 1, None)
    corr = 1
    for s in range(steps):
        t0 = s * STEP_MS
        b.step(s + 1, t0 * 1000, STEP_MS * 1000)
        for i in range(len(LABELS)):
            corr = _label(b, f, t0 + i * LABEL_MS, root, corr)
        post = f.frame(f"{PIPE}/zero_shot_object_detection.py(224): postprocess",
                       t0 + len(LABELS) * LABEL_MS, POST_MS, root)
        b.op("aten::sort", (t0 + len(LABELS) * LABEL_MS + 0.1) * 1000, 4.8 * 1000)
        del post
    return b.write(path)
