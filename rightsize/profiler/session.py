"""One ``rightsize run``: create the run directory, run the job under instrumentation, sample it,
write the manifest, then the analysis.

Inputs: a :class:`~rightsize.profiler.launch.Target` and :class:`RunOptions`. Output: the run
directory (layout in :mod:`rightsize.rundir`) and a :class:`RunResult`. The job is never harmed
by the tool: a collector that fails is recorded in the manifest and the job goes on; the
manifest is written before the job starts and rewritten after it ends, so a crash of either
side still leaves a readable directory.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rightsize.errors import OutputExistsError, RightsizeError
from rightsize.profiler.controller import CaptureSettings, Controller, OnCapture
from rightsize.profiler.host import HostSampler, host_info
from rightsize.profiler.launch import ExitStatus, Target, child_env, run_child
from rightsize.profiler.nvml import NvmlSampler, NvmlStatus
from rightsize.profiler.ondemand import on_demand_analysis, on_demand_collector
from rightsize.profiler.sampler import Sampler, SamplerResult
from rightsize.rundir import (
    ANALYSIS,
    MANIFEST,
    PROCS_DIR,
    SCHEDULE_DEFAULTS,
    TRACES_DIR,
    create_run_dir,
    default_run_dir,
    new_manifest,
    read_proc_records,
    trace_paths,
    write_manifest,
)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Settings of one run (defaults are the CLI's)."""

    out: Path | None = None
    profiler: bool = True
    wait: int = SCHEDULE_DEFAULTS["wait"]
    warmup: int = SCHEDULE_DEFAULTS["warmup"]
    active: int = SCHEDULE_DEFAULTS["active"]
    repeat: int = SCHEDULE_DEFAULTS["repeat"]
    record_shapes: bool = True
    profile_memory: bool = True
    with_stack: bool = False
    with_flops: bool = True
    window_delay_s: float = 1.0
    window_s: float = 2.0
    # SIGTERM/SIGINT while recording: a window recorded for longer than this is cut, not
    # exported (exporting minutes of events would keep the dying job alive; docs/limits.md)
    flush_on_signal_s: float = 2.0
    sample_interval_s: float = 0.1
    gpu_samples: bool = True
    report: bool = True
    # --on-demand: no profiler until a capture is asked for (rightsize trigger, --auto)
    on_demand: bool = False
    capture_poll_s: float = 0.5
    capture_lead_s: float = 1.0
    captures: CaptureSettings = field(default_factory=CaptureSettings)
    labels: dict[str, str] = field(default_factory=dict)  # name, team, project (the manifest's)

    def hook_config(self, run_dir: Path) -> dict[str, Any]:
        """The settings the injected hook reads from ``RIGHTSIZE_RUN``."""
        keys: tuple[str, ...] = ("profiler", "wait", "warmup", "active", "repeat", "record_shapes")
        keys += ("profile_memory", "with_stack", "with_flops", "window_delay_s", "window_s",
                 "flush_on_signal_s", "on_demand", "capture_poll_s", "capture_lead_s")
        return {"run_dir": str(run_dir.resolve()), **{k: getattr(self, k) for k in keys}}


# run directory -> the manifest's ``collectors.analysis`` entry
Analyze = Callable[[Path], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    exit: ExitStatus
    manifest: dict[str, Any]


def run_job(
    target: Target,
    options: RunOptions,
    warn: Callable[[str], None],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    analyze: Analyze | None = None,
    on_capture: OnCapture | None = None,
) -> RunResult:
    """Run ``target`` under rightsize; returns once the job and the analysis are done.

    ``analyze`` is the caller's (the CLI passes the analysis pipeline): the profiler layer never
    imports the analyzers. It takes the run directory and returns the manifest's
    ``collectors.analysis`` entry; it must not raise. ``on_capture`` (``--on-demand``) is
    called with each capture once it is a run directory (analysis, upload); it must not
    raise either."""
    started = now()
    stamp = started.astimezone().strftime("%Y%m%d-%H%M%S")
    out = options.out or default_run_dir(target.name, stamp)
    try:
        run_dir = create_run_dir(out)
    except OutputExistsError:  # run has no --force: a run directory is never reused
        raise RightsizeError(f"{out} already exists and is not empty; a run never overwrites "
                             "one: choose another --out") from None
    manifest = _base_manifest(target, options, started)
    write_manifest(run_dir, manifest)

    nvml = NvmlSampler() if options.gpu_samples else None
    nvml_status = nvml.open() if nvml is not None else NvmlStatus(False, "--no-gpu-samples")
    if not nvml_status.available:
        warn(f"no GPU samples: {nvml_status.reason}")
        manifest["collectors"]["nvml"] = {"status": "missing", "reason": nvml_status.reason}
    manifest["gpus"] = [asdict(g) for g in nvml_status.gpus]
    manifest["driver"] = {
        "driver_version": nvml_status.driver_version,
        "cuda_driver_version": nvml_status.cuda_driver_version,
    }
    write_manifest(run_dir, manifest)

    samplers: list[Sampler] = []
    controllers: list[Controller] = []

    def on_start(pid: int) -> None:
        manifest["child_pid"] = pid
        try:
            host = HostSampler(pid, run_dir / PROCS_DIR)
            sampler = Sampler(
                run_dir,
                host,
                nvml if nvml_status.available else None,
                interval_s=options.sample_interval_s,
                warn=warn,
            )
            sampler.start()
            samplers.append(sampler)
        except Exception as exc:  # noqa: BLE001 - the job runs even if sampling cannot
            warn(f"sampling not started: {exc!r}")
            manifest["collectors"]["host"] = {"status": "failed", "reason": repr(exc)}
        if options.on_demand:
            flush = samplers[0].flush_now if samplers else None
            controllers.append(Controller(run_dir, lambda: manifest, options.captures,
                                          on_capture or (lambda d, m: None), warn, flush))
            controllers[0].start()

    env = child_env(options.hook_config(run_dir))
    t0 = time.monotonic()
    try:
        status = run_child(target.argv, env, on_start=on_start)
    finally:
        for controller in controllers:  # before the sampler stops: the last window's samples
            _stop_controller(controller, warn)
        sampled = _stop_sampling(samplers, nvml, warn)
    manifest["ended_at"] = now().isoformat()
    manifest["duration_s"] = round(time.monotonic() - t0, 3)
    manifest["exit"] = {
        "code": status.exit_code,
        "returncode": status.returncode,
        "signal": status.signal_name,
    }
    # From here on the job is over: nothing may replace its exit status with ours.
    try:
        _finish_manifest(run_dir, manifest, options, nvml_status, nvml, sampled)
        if options.on_demand:
            manifest["collectors"]["analysis"] = on_demand_analysis(controllers)
        report = options.report and not options.on_demand
        manifest["status"] = "analyzing" if report else "done"
        write_manifest(run_dir, manifest)
        if report and analyze is not None:
            manifest["collectors"]["analysis"] = analyze(run_dir)
            manifest["status"] = "done"
            write_manifest(run_dir, manifest)
    except (OSError, ValueError) as exc:
        warn(f"run directory left incomplete: {exc}")
    return RunResult(run_dir, status, manifest)


def _stop_controller(controller: Controller, warn: Callable[[str], None]) -> None:
    try:
        controller.stop()
    except Exception as exc:  # noqa: BLE001 - the job's exit status must survive it
        warn(f"captures not finished: {exc!r}")


def _stop_sampling(
    samplers: list[Sampler], nvml: NvmlSampler | None, warn: Callable[[str], None]
) -> SamplerResult | None:
    """Stop the sampler and NVML; a failure here is a warning (the job already ran)."""
    sampled = None
    try:
        sampled = samplers[0].stop() if samplers else None
    except Exception as exc:  # noqa: BLE001 - the job's exit status must survive a write error
        warn(f"samples not finalized: {exc!r}")
    if nvml is not None:
        nvml.close()
    return sampled


def _base_manifest(target: Target, options: RunOptions, started: datetime) -> dict[str, Any]:
    return new_manifest(
        {"kind": target.kind, "argv": list(target.argv), "name": target.name},
        started.isoformat(),
        {
            "profiler": {"status": "pending"},
            "nvml": {"status": "pending"},
            "host": {"status": "pending"},
            "analysis": {"status": "pending" if options.report else "skipped", "reason": None},
        },
        # who writes this run: a reader that finds "running" with this process gone on this
        # host knows the run was interrupted (rightsize was killed before it could say so)
        rightsize_pid=os.getpid(),
        rightsize_argv=list(sys.argv),
        ended_at=None,
        duration_s=None,
        environment={
            "python": platform.python_version(),
            "python_executable": sys.executable,
            "torch": _dist_version("torch"),
            "cuda": None,
            "nvidia_ml_py": _dist_version("nvidia-ml-py"),
        },
        host=host_info(),
        labels=dict(options.labels) or None,
        gpus=[],
        settings={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
    )


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _finish_manifest(
    run_dir: Path,
    manifest: dict[str, Any],
    options: RunOptions,
    nvml_status: NvmlStatus,
    nvml: NvmlSampler | None,
    sampled: SamplerResult | None,
) -> None:
    tmp = run_dir / TRACES_DIR / ".tmp"
    if tmp.is_dir() and not any(tmp.iterdir()):
        tmp.rmdir()
    records = [r for r in read_proc_records(run_dir) if "pid" in r]
    traces = [p.name for p in trace_paths(run_dir)]
    manifest["files"]["traces"] = [f"{TRACES_DIR}/{name}" for name in traces]
    manifest["collectors"]["profiler"] = (on_demand_collector(run_dir, records) if options.on_demand
                                          else _profiler_collector(options, records, traces))
    for record in records:
        if record.get("torch"):
            manifest["environment"]["torch"] = record["torch"]
            manifest["environment"]["cuda"] = record.get("cuda")
            break
    errors = sampled.errors if sampled else {}
    gpu_rows = sampled.rows["gpu"] if sampled else 0
    if not nvml_status.available:
        nvml_collector: dict[str, Any] = {"status": "missing", "reason": nvml_status.reason}
    elif "nvml" in errors:
        nvml_collector = {"status": "failed", "reason": errors["nvml"], "rows": gpu_rows}
    else:
        nvml_collector = {"status": "collected", "reason": None, "rows": gpu_rows}
    if nvml is not None:
        nvml_collector["unsupported_fields"] = dict(nvml.unsupported)
    manifest["collectors"]["nvml"] = nvml_collector
    if sampled is not None:
        manifest["collectors"]["host"] = {
            "status": "failed" if "host" in errors else "collected",
            "reason": errors.get("host"),
            "rows": sampled.rows["host"],
            "interval_s": sampled.interval_s,
            "ticks": sampled.ticks,
            "late_ticks": sampled.late_ticks,
        }
        manifest["files"]["samples"] = list(sampled.files)
    workers = sorted((run_dir / PROCS_DIR).glob("*.worker"))
    manifest["collectors"]["profiler"]["dataloader_workers_seen"] = len(workers)


def _profiler_collector(
    options: RunOptions, records: list[dict[str, Any]], traces: list[str]
) -> dict[str, Any]:
    """What the profiler did across the job's processes, and why there is no trace if none."""
    processes = [
        {
            k: r.get(k)
            for k in ("pid", "rank", "state", "step_detection", "profiler_steps", "traces")
        }
        | {"skipped": r.get("skipped"), "notes": r.get("notes", [])}
        for r in records
    ]
    modes = sorted({r["step_detection"] for r in records if r.get("step_detection")})
    detection = modes[0] if len(modes) == 1 else ("mixed" if modes else None)
    if not options.profiler:
        status, reason = "disabled", "--no-profiler"
    elif traces:
        status, reason = "collected", None
    elif not records:
        status = "missing"
        reason = "no Python process of the job imported torch (or the startup hook was bypassed)"
    else:
        notes = [n for r in records for n in r.get("notes", [])]
        skipped = [r["skipped"] for r in records if r.get("skipped")]
        status, reason = "missing", "; ".join(notes + skipped) or "no profiling window completed"
    return {
        "status": status,
        "reason": reason,
        "step_detection": detection,
        "traces": len(traces),
        "processes": processes,
    }


def describe(result: RunResult) -> list[str]:
    """The closing lines: where everything is, and what to run next."""
    m = result.manifest
    d = result.run_dir
    lines = [f"run directory: {d}/"]
    prof = m["collectors"]["profiler"]
    if m["files"]["traces"]:
        how = prof.get("step_detection") or "unknown"
        lines.append(f"  traces:   {len(m['files']['traces'])} in {d / TRACES_DIR}/ (steps: {how})")
    else:
        lines.append(f"  traces:   none ({prof.get('reason')})")
    samples = ", ".join(m["files"]["samples"]) or "none"
    lines.append(f"  samples:  {samples}")
    notes = list(dict.fromkeys(n for p in prof.get("processes") or [] for n in p.get("notes") or []))
    lines += [f"  note:     {n}" for n in notes[:3]]
    if len(notes) > 3:
        lines.append(f"  note:     {len(notes) - 3} more in {d / MANIFEST}")
    nvml = m["collectors"]["nvml"]
    if nvml["status"] != "collected":
        lines.append(f"  GPU:      not sampled ({nvml['reason']})")
    analysis = m["collectors"]["analysis"]
    if analysis["status"] == "written":
        lines.append(f"  analysis: {d / ANALYSIS}")
    elif analysis["status"] == "failed":
        lines.append(f"  analysis: not written ({analysis['reason']})")
    exit_ = m["exit"]
    ended = f"signal {exit_['signal']}" if exit_["signal"] else f"exit code {exit_['code']}"
    lines.append(f"job ended with {ended} after {m['duration_s']} s")
    if not m["files"]["traces"] and not any("gpu" in s for s in m["files"]["samples"]):
        # Neither command would work: nothing to analyze (no trace, no GPU samples).
        lines.append(f"nothing to analyze: {prof.get('reason') or 'no trace was written'}; "
                     "make the job import torch (or wrap its loop in rightsize.profile()), "
                     "then rightsize run it again")
        return lines
    lines.append(f"next: rightsize analyze {d} --format text")
    lines.append(f"      rightsize report {d}")
    return lines
