"""Small dcgm-exporter-shaped series with known answers (the exact-expectation tests).

Seven days at 300 s (2,017 points a series) of ``DCGM_FI_DEV_FB_USED`` (MiB),
``DCGM_FI_DEV_GPU_UTIL`` (percent) and ``DCGM_FI_PROF_SM_ACTIVE`` (ratio), labelled as
dcgm-exporter labels them (gpu, UUID, modelName, Hostname, namespace, pod, container; MIG's
GPU_I_PROFILE where the pod runs on a slice). Every tenth sample is the high one, so p95 and
p99 are the high value and the mean is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rightsize.traces.fleet_series import METRICS, SeriesInfo, SeriesSet, normalize_labels

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
STEP_S = 300
POINTS = 7 * 24 * 12 + 1  # 7 days inclusive: 2,017 points
MODEL = "NVIDIA A100-SXM4-80GB"
Series = tuple[str, Mapping[str, str], Sequence[tuple[float, float]]]


def _labels(pod: str, gpu: int, node: str, ns: str = "ml") -> dict[str, str]:
    return {"gpu": str(gpu), "UUID": f"GPU-{abs(hash((pod, gpu))) % 10**12:012d}-0000",
            "modelName": MODEL, "Hostname": node, "namespace": ns, "pod": pod,
            "container": "server"}


def _wave(low: float, high: float, n: int = POINTS) -> list[float]:
    return [high if i % 10 == 0 else low for i in range(n)]


def pod(pod_name: str, node: str, mem_mib: tuple[float, float],
        util_pct: tuple[float, float] | None, sm_ratio: tuple[float, float] | None,
        n: int = POINTS, gpu: int = 0) -> list[Series]:
    labels = _labels(pod_name, gpu, node)
    times = [T0 + STEP_S * i for i in range(n)]
    out: list[Series] = [("DCGM_FI_DEV_FB_USED", labels,
                          list(zip(times, _wave(*mem_mib, n), strict=True)))]
    if util_pct is not None:
        out.append(("DCGM_FI_DEV_GPU_UTIL", labels,
                    list(zip(times, _wave(*util_pct, n), strict=True))))
    if sm_ratio is not None:
        out.append(("DCGM_FI_PROF_SM_ACTIVE", labels,
                    list(zip(times, _wave(*sm_ratio, n), strict=True))))
    return out


def scenarios() -> list[Series]:
    """ml/small: fits 1g.10gb (7 GiB peak, SM_ACTIVE p95 8%); ml/big: needs the whole GPU
    (60 GiB, SM_ACTIVE p95 70%); ml/nosm: the duty cycle alone (6 GiB, p95 40%) cannot decide
    about 1g.10gb; ml/web: four replicas of 60 GiB at SM_ACTIVE 15% shrink to one."""
    s = pod("small-6d4cf56db6-x2x7k", "node-a", (6144, 7168), (30, 30), (0.05, 0.08))
    s += pod("big-7b9c8d5f4-k8mzq", "node-a", (61440, 61440), (95, 95), (0.65, 0.70))
    s += pod("nosm-5f6d7c8b9-q2w4r", "node-b", (6144, 6144), (20, 40), None)
    for i, suffix in enumerate(("bd2zc", "c4k9x", "dq7lm", "f8n2p")):
        s += pod(f"web-5c8d7f9b6-{suffix}", f"node-{'cdef'[i]}", (61440, 61440), (50, 50),
                 (0.15, 0.15))
    return s


def short() -> list[Series]:
    """ml/brief: three hours only (inconclusive: the window is short)."""
    return pod("brief-8f7d6c5b4-zz9qq", "node-a", (6144, 6144), (10, 10), (0.02, 0.02), n=37)


def response(series: Sequence[Series]) -> bytes:
    """A query_range response (what Prometheus returns for raw selectors) of these series."""
    import json

    result = [{"metric": {"__name__": n, **lb},
               "values": [[t, repr(float(v))] for t, v in pts]} for n, lb, pts in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                      "result": result}},
                      separators=(",", ":")).encode()


def series_set(series: Sequence[Series], source: str = "generated") -> SeriesSet:
    """The same series read in memory (as the readers would normalize them)."""
    import polars as pl

    infos = []
    frames = []
    for i, (name, labels, points) in enumerate(series):
        d = METRICS[name]
        infos.append(SeriesInfo(d.canonical, name, normalize_labels(labels)))
        frames.append(pl.DataFrame({
            "series": pl.Series([i] * len(points), dtype=pl.UInt32),
            "t_ns": pl.Series([int(t * 1e9) for t, _ in points], dtype=pl.Int64),
            "value": pl.Series([v * d.factor for _, v in points], dtype=pl.Float64)}))
    return SeriesSet(tuple(infos), pl.concat(frames), source, float(STEP_S))


def on_a_slice() -> list[Series]:
    """ml/sliced: on a MIG 3g.40gb today (GPU_I_PROFILE), 6 GiB, SM_ACTIVE 10% of the slice
    (4.3% of the GPU): 1g.10gb holds it."""
    out = []
    for name, labels, points in pod("sliced-6b7c8d9f5-m2n4p", "node-g", (6144, 6144), None,
                                    (0.10, 0.10)):
        out.append((name, {**labels, "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "2"}, points))
    return out
