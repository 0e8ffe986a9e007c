"""The ``comms`` frame: collective args of NCCL kernels and record_param_comms ops, read from
Kineto JSON by both parsers, and absent (empty) where a trace records none."""

from __future__ import annotations

import polars as pl
import pytest

from rightsize.traces.kineto import read_kineto
from tests.conftest import shared_path
from tests.tracebuilder import TraceBuilder

ARGS = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
        "dtype": "BFloat16", "Group size": 4, "Process Group Name": "3",
        "Process Group Ranks": "[0, 1, 2, 3]", "Seq": 17}


def _trace(tmp_path, with_args: bool):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("record_param_comms", 10, 20, ext=5, **(ARGS if with_args else {}))
    b.launch("cudaLaunchKernel", 15, 5, corr=9, ext=5)
    b.x("kernel", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 40, 100, pid=0,
        tid=20, device=0, stream=20, correlation=9, **({"External id": 5} | (
            ARGS if with_args else {})))
    return b.write(tmp_path / "t.json")


def test_collective_args_become_comms_rows(tmp_path, both_parsers):
    trace = read_kineto(_trace(tmp_path, True), lean=True)
    rows = trace.comms.select("kind", "device", "stream", "correlation", "external_id",
                              "collective", "in_nelems", "out_nelems", "dtype", "group_size",
                              "pg_name", "pg_ranks", "seq").to_dicts()
    common = {"external_id": 5, "collective": "allreduce", "in_nelems": 1024,
              "out_nelems": 1024, "dtype": "BFloat16", "group_size": 4, "pg_name": "3",
              "pg_ranks": "[0, 1, 2, 3]", "seq": 17}
    assert rows == [
        {"kind": "cpu_op", "device": None, "stream": None, "correlation": None, **common},
        {"kind": "kernel", "device": 0, "stream": 20, "correlation": 9, **common},
    ]
    assert trace.comms["dur_ns"].to_list() == [20_000, 100_000]
    # the other frames are as without the args: the kernel and the op are still there
    assert trace.kernels.height == 1 and trace.cpu_ops["name"].to_list() == ["record_param_comms"]


def test_no_collective_args_no_rows(tmp_path, both_parsers):
    trace = read_kineto(_trace(tmp_path, False), lean=True)
    assert trace.comms.height == 0 and trace.kernels.height == 1


@pytest.mark.shared
def test_shared_nccl_trace_comms():
    """HTA's nccl_data (NCCL 2.17, rank 0 of 2): 15 all-reduce and 6 broadcast kernels carry
    the args, and 27 record_param_comms ops (15 allreduce, 6 broadcast, 6 wait; counted with
    json.load); no "Seq" is recorded."""
    trace = read_kineto(shared_path("traces", "kineto",
                                    "hta-nccl_parser_config-nccl_data.json.gz"), lean=True)
    by = dict(trace.comms.group_by("kind", "collective").len()
              .select(pl.concat_str("kind", "collective", separator=":"), "len").iter_rows())
    assert by == {"kernel:allreduce": 15, "kernel:broadcast": 6, "cpu_op:allreduce": 15,
                  "cpu_op:broadcast": 6, "cpu_op:wait": 6}
    assert trace.comms["seq"].null_count() == 48
    # the wait ops name no group members ("[]"); the others the default group of both ranks
    assert dict(trace.comms.group_by("pg_ranks").len().iter_rows()) == {"[0, 1]": 42, "[]": 6}
