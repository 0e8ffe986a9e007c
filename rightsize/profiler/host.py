"""Host sampling with psutil: the machine's CPUs and the job's process tree.

Runs in the ``rightsize run`` parent. The job is the launched command and all its descendants
(torchrun ranks, DataLoader workers). Each :meth:`HostSampler.sample` gives one row in the
:data:`rightsize.traces.samples.HOST_SAMPLES` columns and the set of the job's live pids (NVML
uses it to pick the job's GPU memory out of the per-process list).

DataLoader workers are counted from the marker files ``procs/<pid>.worker`` that the injected
hook leaves when a process enters torch's worker loop.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


class HostSampler:
    """Samples the host and the process tree rooted at ``root_pid``."""

    def __init__(self, root_pid: int, procs_dir: Path | None = None) -> None:
        self._root_pid = root_pid
        self._procs_dir = procs_dir
        self._procs: dict[int, psutil.Process] = {}
        self._read_bytes: dict[int, int] = {}
        self._disk_read_bytes: int | None = None
        self._last_s: float | None = None
        psutil.cpu_percent(percpu=True)  # prime: the first call measures from here

    def job_pids(self) -> set[int]:
        """The live pids of the job's tree (root included)."""
        return set(self._tree())

    def _tree(self) -> dict[int, psutil.Process]:
        try:
            root = self._procs.get(self._root_pid) or psutil.Process(self._root_pid)
            found = [root, *root.children(recursive=True)]
        except _GONE:
            return {}
        tree = {}
        for proc in found:
            # keep the Process object we already have: cpu_percent() measures since its last call
            tree[proc.pid] = self._procs.get(proc.pid, proc)
        self._procs = tree
        return tree

    def sample(self, t_ns: int) -> tuple[dict, set[int]]:
        now_s = time.monotonic()
        elapsed_s = None if self._last_s is None else max(now_s - self._last_s, 1e-6)
        self._last_s = now_s
        tree = self._tree()
        cpu_pct = rss = 0.0
        read_delta = 0
        live: set[int] = set()
        for pid, proc in tree.items():
            try:
                with proc.oneshot():
                    cpu_pct += proc.cpu_percent(None)
                    rss += proc.memory_info().rss
                    read = _read_bytes(proc)
            except _GONE:
                continue
            live.add(pid)
            if read is not None:
                read_delta += max(read - self._read_bytes.get(pid, read), 0)
                self._read_bytes[pid] = read
        disk = psutil.disk_io_counters()
        disk_rate = None
        if disk is not None:
            if self._disk_read_bytes is not None and elapsed_s is not None:
                disk_rate = max(disk.read_bytes - self._disk_read_bytes, 0) / elapsed_s
            self._disk_read_bytes = disk.read_bytes
        cores = psutil.cpu_percent(percpu=True)
        vm = psutil.virtual_memory()
        row = {
            "t_ns": t_ns,
            "cpu_util_pct": sum(cores) / len(cores) if cores else None,
            "cpu_core_util_pct": [float(c) for c in cores],
            "cpu_count": len(cores),
            "job_cpu_util_pct": cpu_pct,
            "job_rss_bytes": int(rss),
            "job_processes": len(live),
            "dataloader_workers": self._workers(live),
            "job_disk_read_bytes_per_s": None if elapsed_s is None else read_delta / elapsed_s,
            "disk_read_bytes_per_s": disk_rate,
            "mem_used_bytes": int(vm.used),
            "mem_total_bytes": int(vm.total),
        }
        return row, live

    def _workers(self, live: set[int]) -> int | None:
        if self._procs_dir is None:
            return None
        marked = {int(p.stem) for p in self._procs_dir.glob("*.worker") if p.stem.isdigit()}
        return len(marked & live)


def _read_bytes(proc: psutil.Process) -> int | None:
    """Bytes the process made storage read (Linux /proc/PID/io); None where unsupported."""
    io_counters = getattr(proc, "io_counters", None)
    if io_counters is None:
        return None
    try:
        return int(io_counters().read_bytes)
    except (psutil.AccessDenied, NotImplementedError):
        return None


def host_info() -> dict:
    """Static facts about the machine, for the manifest."""
    import platform
    import socket

    freq = psutil.cpu_freq()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model() or platform.processor() or None,
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_max_mhz": None if freq is None else freq.max or None,
        "mem_total_bytes": psutil.virtual_memory().total,
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None
