"""The nccl-tests / rccl-tests reader (traces/nccl_tests.py): tables read apart with their rank
lines, both output formats, srun prefixes, what a table does not print derived, one-line errors
for what is not nccl-tests output, truncated and empty logs; and every shared log read."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.errors import InputError
from rightsize.traces import loader
from rightsize.traces.nccl_tests import parse_log, read_log
from tests.conftest import cli, shared_path

TWO_TESTS = """\
# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5
#
# Using devices
#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0x01] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12 on nodeA device  1 [0x02] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  13 on nodeB device  0 [0x01] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  14 on nodeB device  1 [0x02] NVIDIA H100 80GB HBM3
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)
     1048576        262144     float     sum      -1    100.0   10.49   15.73      0    99.0
     2097152        524288     float     sum      -1    150.0   13.98   20.97      0    N/A
# Out of bounds values : 0 OK
# Collective test concluded: all_reduce_perf

# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5
#  Rank  0 Group  0 Pid  21 on nodeA device  0 [0x01] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  22 on nodeB device  0 [0x01] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong
     1048576        131072     float    none      -1     50.0   20.97   10.49      0
# Avg bus bandwidth    : 10.49
"""
OLD_FORMAT = """\
# Using devices
#   Rank  0 Pid 1 on      a0048 device  0 [0x27] A100-SXM4-40GB
#   Rank  1 Pid 2 on      a0048 device  1 [0x2a] A100-SXM4-40GB
#       size         count    type   redop     time   algbw   busbw  error     time
     1048576        262144   float     sum    75.38   13.91   13.91  2e-07    74.40
"""
SRUN_NO_RANKS = """\
```txt
0: #       size         count      type   redop    root     time   algbw   busbw #wrong
0: #        (B)    (elements)                               (us)  (GB/s)  (GB/s)
0:      1048576        262144     float     sum      -1    123.2    8.51   15.95      0
0:     16777216       4194304     float     sum      -1    298.1   56.28  105.52      0
```
"""


def test_two_tests_of_one_log_are_read_apart_with_their_rank_lines():
    log = parse_log(TWO_TESTS)
    assert (log.tool, log.library) == ("nccl-tests", "2.29.2")
    ar, ag = log.tables
    assert (ar.collective, ar.ranks, ar.hosts, ar.nodes, ar.per_node, ar.gpu, ar.redop) == (
        "all_reduce", 4, ("nodeA", "nodeB"), 2, 2, "NVIDIA H100 80GB HBM3", "sum")
    assert [(r.bytes, r.count, r.dtype, r.time_ns, r.algbw_gbs, r.busbw_gbs, r.inplace_time_ns)
            for r in ar.rows] == [(1048576, 262144, "float", 100000, 10.49, 15.73, 99000),
                                  (2097152, 524288, "float", 150000, 13.98, 20.97, None)]
    assert (ag.collective, ag.ranks, ag.nodes, ag.notes) == ("all_gather", 2, 2, ())
    assert [r.time_ns for r in ag.rows] == [50000]


def test_the_old_format_and_a_readme_excerpt_without_rank_lines():
    (old,) = parse_log(OLD_FORMAT).tables
    assert (old.collective, old.ranks, old.hosts, old.gpu) == ("all_reduce", 2, ("a0048",),
                                                               "A100-SXM4-40GB")
    assert [(r.bytes, r.time_ns) for r in old.rows] == [(1048576, 75380)]
    (srun,) = parse_log(SRUN_NO_RANKS).tables
    # no *_perf name and no rank line: all-reduce and 16 ranks from busbw / algbw = 1.875
    assert (srun.collective, srun.ranks, srun.hosts, srun.nodes) == ("all_reduce", 16, (), None)
    assert srun.notes == (("collective not named in the log: all_reduce, from busbw / algbw = "
                          "1.8749"), "rank count not printed: 16, from busbw / algbw = 1.8749")


@pytest.mark.parametrize(("text", "error"), [
    ("hello\nworld\n", ("not nccl-tests or rccl-tests output (no '# size count type ... time "
                       "algbw busbw' result table)")),
    (TWO_TESTS.split("     2097152")[0] + "     2097152        524288     float",
     "truncated: line 14 has 3 of the table's 10 columns"),
    (TWO_TESTS.split("     2097152")[0], ("truncated: the table stops at 1048576 bytes, below "
                                          "the maxBytes 2097152 its run announced")),
    ("#       size         count      type   redop    root     time   algbw   busbw\n",
     "truncated: the table at line 1 has no rows"),
    (TWO_TESTS.replace("20.97      0    N/A", "30.97      0    N/A"),
     "2097152 B: busbw 30.97 is not algbw 13.98 x 1.5000 (all_reduce, 4 ranks)"),
    (SRUN_NO_RANKS.replace("sum", "none").replace("15.95", "8.51").replace("105.52", "56.28"),
     "names no collective (no *_perf before it) and its columns do not tell which one it is"),
])
def test_what_is_not_a_whole_nccl_tests_log_is_a_one_line_error(text, error):
    with pytest.raises(InputError) as exc:
        parse_log(text, "x.log")
    assert str(exc.value).startswith("x.log: ")
    assert error in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_loader_detects_it_and_the_analysis_refuses_it(tmp_path: Path):
    log = tmp_path / "ar.log"
    log.write_text(TWO_TESTS)
    assert loader.detect(log).name == "nccl-tests"
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        read_log(empty)
    res = cli("analyze", log, "--no-report")
    assert res.returncode == 1
    assert res.stderr.strip() == (f"rightsize: error: {log}: nccl-tests output measures a "
                                  f"fabric, it is not a trace: check it with `rightsize comm "
                                  f"check {log}`, or fit the communication model on it with "
                                  f"`rightsize comm fit {log} -o comm.json` and pass "
                                  "`--comm-model comm.json`")


@pytest.mark.shared
def test_every_shared_log_reads():
    """Each of ../shared/nccl's 12 files: its tables, ranks and nodes as their sources say."""
    want = {
        "a100-40gb-16gpu-2node-ib-dgxa100-allreduce.txt": [("all_reduce", 16, 2, 29)],
        "a100-40gb-32gpu-8node-slingshot11-cxi-allreduce.txt": [("all_reduce", 32, 8, 29)],
        "a100-40gb-8gpu-1node-nvswitch-abci-allreduce-upto32MB.txt": [("all_reduce", 8, 1, 24)],
        "a100-80gb-16gpu-2node-efa-p4de.24xlarge-allreduce.txt": [("all_reduce", 16, None, 29)],
        "gh200-16gpu-4node-slingshot11-allreduce.txt": [("all_reduce", 16, 4, 30)],
        "h100-16gpu-2node-efa-p5.48xlarge-allreduce.txt": [("all_reduce", 16, None, 32)],
        "h100-80gpu-10node-unstated-fabric-allreduce_allgather_reducescatter_alltoall_"
        "sendrecv.txt": [(c, 80, 10, 10) for c in ("all_reduce", "all_gather",
                                                    "reduce_scatter", "alltoall", "sendrecv")],
        "h100-8gpu-1node-nvswitch-allreduce_allgather_reducescatter_alltoall_sendrecv.txt":
            [(c, 8, 1, 10) for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                     "sendrecv")],
        "mi300x-16gpu-2node-roce-allreduce.txt": [("all_reduce", 16, 2, 32)],
        "mi300x-8gpu-1node-xgmi-allreduce.txt": [("all_reduce", 8, 1, 31)],
        "rtx2080ti-2gpu-1node-pcie3-noP2P-allreduce_allgather_broadcast_reduce_alltoall.txt": [
            ("all_reduce", 2, 1, 28), ("all_gather", 2, 1, 26), ("broadcast", 2, 1, 28),
            ("reduce", 2, 1, 28), ("reduce", 1, 1, 28), ("alltoall", 2, 1, 26)],
        "rtx4090-2and4gpu-1node-pcie-allreduce.txt": [("all_reduce", 2, 1, 29),
                                                      ("all_reduce", 4, 1, 29)],
    }
    for name, tables in want.items():
        log = read_log(shared_path("nccl", name))
        assert [(t.collective, t.ranks, t.nodes, len(t.rows)) for t in log.tables] == tables, name
    mi = read_log(shared_path("nccl", "mi300x-16gpu-2node-roce-allreduce.txt"))
    assert (mi.tool, mi.library, mi.tables[0].gpu) == ("rccl-tests", "2.22.3",
                                                       "AMD Instinct MI300X")
