"""nvidia-smi ``--query-gpu`` logs of an 8-GPU training job, written as nvidia-smi writes them.

``nvidia-smi --query-gpu=timestamp,name,pci.bus_id,utilization.gpu,memory.used,power.draw
--format=csv -l 1`` on an HGX H100 node: a header with units, then one row per GPU per round,
GPUs in bus order, each row stamped with the millisecond nvidia-smi read that GPU (a round of
8 GPUs takes 0.28 ms, so a fifth of the rounds straddle two stamps).

The job (one round a second, ``ROUNDS`` rounds from ``START``): GPUs idle before it (0%, 4 MiB,
about 70 W) for ``IDLE_BEFORE`` s; the job loads for 10 s (0%, memory growing, 115 W); trains
at 100% near 690 W (+-25 W by GPU and round); from ``STALL_FROM`` for ``STALL_S`` s GPU
``STALLED`` stops (0%, 120 W) while the seven others spin in NCCL at 100% and 230 W, a third
of their busy power; the job ends at ``JOB_END``, memory freed, idle to the end.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

BUS_IDS = ("00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
           "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0")
NAME = "NVIDIA H100 80GB HBM3"
START = dt.datetime(2025, 2, 11, 9, 0, 0, 112_000)
ROUNDS, IDLE_BEFORE, LOAD_S, JOB_END = 600, 60, 10, 540
STALL_FROM, STALL_S, STALLED = 300, 40, 5
HEADER = ("timestamp, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], "
          "power.draw [W]")


def _row(i: int, g: int) -> tuple[int, int, float]:
    """utilization %, memory MiB, power W of GPU ``g`` in round ``i``."""
    wobble = ((i * 7 + g * 13) % 11 - 5) * 5.0  # +-25 W, the same every time it is built
    if i < IDLE_BEFORE or i >= JOB_END:
        return 0, 4, 69.0 + (g % 3)
    if i < IDLE_BEFORE + LOAD_S:
        return 0, 6000 * (i - IDLE_BEFORE + 1), 115.0 + (g % 3)
    if STALL_FROM <= i < STALL_FROM + STALL_S:
        return (0, 61_440, 120.0 + g) if g == STALLED else (100, 61_440, 230.0 + wobble / 5)
    return 100, 61_440, 690.0 + wobble


def rounds() -> list[list[tuple[str, int, int, int, float]]]:
    """Per round, per GPU in bus order: (timestamp, GPU, utilization, memory, power)."""
    out = []
    for i in range(ROUNDS):
        # the round starts 0-2.9 ms into its second; each GPU read 0.04 ms after the last
        t0 = START + dt.timedelta(seconds=i, microseconds=(i * 37 % 30) * 100)
        rows = []
        for g in range(len(BUS_IDS)):
            stamp = t0 + dt.timedelta(microseconds=40 * g)
            text = stamp.strftime("%Y/%m/%d %H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"
            rows.append((text, g, *_row(i, g)))
        out.append(rows)
    return out


def write_log(path: Path, bus_id: bool = True) -> Path:
    """The log; ``bus_id=False`` leaves the ``pci.bus_id`` column out (as a
    ``--query-gpu=timestamp,name,utilization.gpu,memory.used,power.draw`` log)."""
    header = HEADER if bus_id else HEADER.replace(" pci.bus_id,", "")
    lines = [header]
    for r in rounds():
        for stamp, g, util, mem, power in r:
            bus = f" {BUS_IDS[g]}," if bus_id else ""
            lines.append(f"{stamp}, {NAME},{bus} {util} %, {mem} MiB, {power:.2f} W")
    path.write_text("\n".join(lines) + "\n")
    return path
