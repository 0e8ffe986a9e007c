"""The hook records with ``trace_only`` where torch has it (2.13): the stop inside the job's step
skips building Python-side events rightsize never reads. These tests hold that the option is
asked for only where it exists and changes nothing in the trace."""

from __future__ import annotations

import collections
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rightsize.profiler

torch = pytest.importorskip("torch")

BOOTSTRAP = Path(rightsize.profiler.__file__).parent / "bootstrap" / "_rightsize_state.py"
# ids, addresses and allocator totals differ between two recordings of the same steps
RUN_SPECIFIC = {"External id", "Record function id", "Ev Idx", "Sequence number",
                "Fwd thread id", "Addr", "Total Allocated", "Total Reserved"}


@pytest.fixture()
def state(monkeypatch):
    # in a job the bootstrap folder is on sys.path, so its modules import each other by name
    monkeypatch.syspath_prepend(str(BOOTSTRAP.parent))
    spec = importlib.util.spec_from_file_location("_rightsize_state_trace_only", BOOTSTRAP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _has_trace_only() -> bool:
    from torch._C._profiler import _ExperimentalConfig

    try:
        _ExperimentalConfig(trace_only=True)
    except TypeError:
        return False
    return True


def test_trace_only_where_torch_has_it(state) -> None:
    options = state._trace_only()
    if not _has_trace_only():
        assert options == {}
        return
    assert options["experimental_config"].trace_only is True
    state.CONFIG["with_stack"] = True  # torch builds the events for stacks anyway, and warns
    assert state._trace_only() == {}


# The same steps recorded in a fresh process each time: in the test process, a block some
# earlier test allocated can be freed inside the window and add a [memory] event to one
# recording only.
RECORD = r"""
import gc, sys, warnings
import torch
from torch.profiler import ProfilerActivity, profile, schedule
sys.path.insert(0, sys.argv[2])
import _rightsize_state as state
warnings.simplefilter("ignore")
options = state._trace_only() if sys.argv[3] == "lean" else {}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(8, 32)
gc.collect()
gc.disable()
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1]), record_shapes=True,
             profile_memory=True, with_flops=True, **options) as prof:
    for _ in range(5):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        prof.step()
"""


def _record(tmp_path: Path, name: str) -> collections.Counter:
    path = tmp_path / f"{name}.json"
    subprocess.run([sys.executable, "-c", RECORD, str(path), str(BOOTSTRAP.parent), name],
                   check=True, capture_output=True, timeout=120)
    events = json.loads(path.read_text())["traceEvents"]
    return collections.Counter(
        (e.get("ph"), e.get("cat"), e.get("name"),
         json.dumps({k: v for k, v in (e.get("args") or {}).items() if k not in RUN_SPECIFIC},
                    sort_keys=True))
        for e in events if e.get("ph") in ("X", "i"))


@pytest.mark.slow  # real PyTorch jobs in subprocesses: 5-20 s on the 2-core VM
def test_trace_only_trace_is_the_same(tmp_path: Path) -> None:
    if not _has_trace_only():
        pytest.skip("this torch has no trace_only")
    full = _record(tmp_path, "full")
    lean = _record(tmp_path, "lean")
    assert sum(full.values()) > 100
    assert full == lean
