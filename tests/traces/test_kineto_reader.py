"""The Kineto reader: formats, units and edge cases, on hand-built and real traces."""

from __future__ import annotations

import gzip
import io
import json
import re

import pytest

from rightsize.errors import InputError
from rightsize.traces import jsonbytes, jsonscan
from rightsize.traces.kineto import read_kineto
from tests.conftest import shared_path
from tests.tracebuilder import BASE_NS, TraceBuilder, two_step_trace
from tests.traces.conftest import KINETO_FRAMES

pytestmark = pytest.mark.usefixtures("both_parsers")  # compiled and polars-only


def write(tmp_path, doc, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_relative_timestamps_become_exact_epoch_ns(tmp_path):
    b = TraceBuilder(base_ns=BASE_NS)
    b.kernel("k", 4458676983543.183, 1.888, corr=1)
    t = read_kineto(b.write(tmp_path / "t.json"))
    assert t.kernels["ts_ns"][0] == BASE_NS + 4458676983543183
    assert t.kernels["dur_ns"][0] == 1888
    assert t.meta.base_time_ns == BASE_NS


def test_absolute_integer_timestamps_keep_every_ns(tmp_path):
    b = TraceBuilder()
    b.kernel("k", 1623142623529248, 1940, corr=1)
    b.kernel("k2", 1669783687464300.5, 0.25, corr=2)
    t = read_kineto(b.write(tmp_path / "t.json"))
    assert t.kernels["ts_ns"].to_list() == [1623142623529248000, 1669783687464300500]
    assert t.kernels["dur_ns"].to_list() == [1940000, 250]


def test_sub_microsecond_floats_never_give_negative_durations(tmp_path):
    b = TraceBuilder()
    b.kernel("a", 10.2, 0.0004, corr=1).kernel("b", 10.3, -0.5, corr=2)
    b.kernel("c", 1.5e-3, 2e-4, corr=3)  # exponent notation
    t = read_kineto(b.write(tmp_path / "t.json"))
    assert t.kernels.sort("ts_ns")["dur_ns"].to_list() == [0, 0, 0]
    assert t.kernels.sort("ts_ns")["ts_ns"].to_list() == [2, 10200, 10300]


def test_legacy_2021_names_string_tids_and_lowercase_external_id(tmp_path):
    doc = {"computeProperties": [{"id": 0, "name": "Tesla V100-DGXS-32GB",
                                  "totalGlobalMem": 34089730048, "major": 7, "minor": 0,
                                  "multiProcessorCount": 80}],
           "traceEvents": [
               {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": "25738",
                "tid": "25738", "ts": 100, "dur": 50},
               {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": "25738",
                "tid": "25738", "ts": 101, "dur": 5, "args": {"external id": 7}},
               {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": "25738",
                "tid": "25738", "ts": 102, "dur": 2,
                "args": {"correlation": 9, "external id": 7}},
               {"ph": "X", "cat": "Kernel", "name": "implicit_convolve_sgemm", "pid": 0,
                "tid": "stream 7", "ts": 110, "dur": 20,
                "args": {"correlation": 9, "external id": 7, "blocks per SM": 1.2,
                         "theoretical occupancy %": 25}},
               {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0, "tid": "stream 7", "ts": 131, "dur": 4,
                "args": {"bytes": 4000, "external id": 7}},
               {"ph": "i", "name": "[memory]", "pid": "25738", "tid": "25738", "ts": 101,
                "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512}},
               {"ph": "s", "cat": "async", "id": 9, "pid": "25738", "tid": "25738", "ts": 102},
           ]}
    t = read_kineto(write(tmp_path, doc))
    assert t.meta.legacy_names
    assert t.steps.select("step", "pid").row(0) == (3, "25738")
    assert t.kernels.select("device", "stream", "external_id", "occupancy_pct").row(0) == (
        0, 7, 7, 25.0)
    assert t.transfers.select("direction", "src_memory", "dst_memory", "bytes").row(0) == (
        "HtoD", "pageable", "device", 4000)
    assert t.transfers["bandwidth_gbps"][0] == 1.0
    assert t.runtime["api"].to_list() == ["runtime"]
    assert t.cpu_ops["external_id"].to_list() == [7]
    assert t.memory.select("device", "delta_bytes", "total_allocated_bytes").row(0) == (0, 512, None)
    assert t.flows.select("cat", "id").row(0) == ("launch", 9)
    assert t.devices.select("name", "sm_count", "compute_major").row(0) == (
        "Tesla V100-DGXS-32GB", 80, 7)


def test_missing_metadata_and_non_numeric_pids(tmp_path):
    doc = {"traceEvents": [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "PyTorch Profiler", "ts": 1, "dur": 100},
        {"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "",
         "ts": 1, "s": "g"},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": "", "tid": 3, "ts": 2, "dur": 3},
    ]}
    t = read_kineto(write(tmp_path, doc))
    assert t.windows.select("ts_ns", "dur_ns").row(0) == (1000, 100000)
    assert t.cpu_ops["pid"].to_list() == [""]
    assert t.meta.vendor == "none" and t.devices.height == 0


def test_cuda_graph_launch_many_kernels_one_correlation(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 100).step(2, 100, 100)
    for step in (0, 100):
        b.launch("cudaGraphLaunch", step + 1, 2, corr=50 + step)
        for i in range(3):
            b.kernel(f"graph_kernel_{i}", step + 10 + 10 * i, 5, corr=50 + step)
    t = read_kineto(b.write(tmp_path / "g.json"))
    from rightsize.analyzers.metrics.steps import find_steps
    steps = find_steps(t)
    assert steps.count == 2 and steps.device_aware and steps.dropped == 0
    assert t.kernels.filter(t.kernels["correlation"] == 50).height == 3


def test_json_array_format_and_gzip(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
               "args": {"device": 0, "stream": 7}}]
    path = tmp_path / "a.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(events, fh)
    t = read_kineto(path)
    assert t.kernels.height == 1 and t.meta.event_count == 1


def test_amd_rocm_and_cpu_only_shared_traces():
    amd = read_kineto(shared_path("traces", "kineto",
                                  "hta-amd_trace-mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert amd.meta.vendor == "amd"
    assert amd.kernels.height == 14 and amd.kernels["blocks_per_sm"].null_count() == 14
    cpu = read_kineto(shared_path("traces", "kineto",
                                  "hta-cpu_only-rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert cpu.meta.vendor == "none" and cpu.kernels.height == 0
    assert (cpu.meta.rank, cpu.meta.world_size, cpu.meta.backend) == (34, 300, "gloo")


def test_real_trace_counts_match_a_plain_json_parse():
    path = shared_path("traces", "kineto", "hta-nccl_parser_config-nccl_data.json.gz")
    raw = json.loads(gzip.decompress(path.read_bytes()))
    events = raw["traceEvents"]
    t = read_kineto(path)
    assert t.meta.event_count == len(events)
    assert t.kernels.height == sum(e.get("cat") == "kernel" for e in events)
    assert t.runtime.height == sum(e.get("cat") in ("cuda_runtime", "cuda_driver") for e in events)
    assert t.meta.base_time_ns == raw["baseTimeNanoseconds"]
    total_us = sum(e["dur"] for e in events if e.get("cat") == "kernel")
    assert int(t.kernels["dur_ns"].sum()) == pytest.approx(total_us * 1000, abs=len(events))


def test_scan_handles_elements_split_across_chunks_and_tricky_strings(tmp_path):
    names = ['a "quoted" }{ name', "back\\slash\\", "brace [ ] , : {", "end\\\\"]
    b = TraceBuilder()
    for i in range(200):
        b.op(names[i % 4] + str(i), i, 1)
    doc = b.document()
    data = json.dumps(doc, indent=2).encode()
    scan = jsonscan.Scan(io.BytesIO(data), chunk_bytes=97)
    lines = b"\n".join(b.ndjson for b in scan.batches()).split(b"\n")
    assert [json.loads(x)["name"] for x in lines] == [e["name"] for e in doc["traceEvents"]]
    assert json.loads(scan.envelope)["deviceProperties"][0]["numSms"] == 132


@pytest.mark.parametrize("content,problem", [
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1', "truncated"),
    ('{"deviceProperties": [{"id": 0', "truncated JSON"),
    ('{"traceEvents": [1, 2]}', "not a JSON object"),
    ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "separator"),
    ('{"other": {"traceEvents": 1}}', "no traceEvents array"),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x", "dur": 1}]}',
     "no numeric 'ts'"),
])
def test_malformed_documents_name_the_problem(tmp_path, content, problem):
    with pytest.raises(InputError) as err:
        read_kineto(write(tmp_path, content))
    assert problem in str(err.value)
    assert "\n" not in str(err.value)


def test_two_step_trace_round_trip(tmp_path):
    t = read_kineto(two_step_trace().write(tmp_path / "x.json.gz", gz=True))
    assert (t.kernels.height, t.transfers.height, t.runtime.height, t.steps.height) == (4, 2, 6, 2)
    assert t.cpu_ops.filter(t.cpu_ops["name"] == "aten::mm")["input_dims"][0] == \
        "[[64, 128], [128, 256]]"
    assert (t.meta.rank, t.meta.world_size) == (0, 2)


def test_fast_path_falls_back_when_the_indentation_misleads(tmp_path):
    # "\n  },\n  {" also occurs inside the first event's args here: the fast split cuts that
    # event, polars rejects the pieces, and the structural scan splits the batch again.
    doc = (b'{"traceEvents": [\n  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, '
           b'"tid": 1, "ts": 1, "dur": 2, "args": {"l": [{"x": 1\n  },\n  {"x": 2}]}\n  },\n'
           b'  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3, "dur": 1}'
           b'\n]}')
    scan = jsonscan.Scan(io.BytesIO(doc))
    fast = [b for b in scan.batches() if b.count == -1]  # cut at the separator, not counted
    assert len(fast) == 1
    assert fast[0].ndjson.count(b"\n") == 1  # the fast split cut the first event in two
    assert scan.resplit(fast[0]).count(b"\n") == 0  # it is one whole event
    path = tmp_path / "odd.json"
    path.write_bytes(doc)
    trace = read_kineto(path)
    assert trace.cpu_ops["name"].to_list() == ["a", "b"]
    assert trace.meta.event_count == 2


def test_args_of_unexpected_types_fall_back_to_text(tmp_path):
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"device": "0", "stream": 7, "correlation": "12", "blocks per SM": "0.5"}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 0, "dur": 1, "args": {"correlation": 12.0}},
    ]}
    t = read_kineto(write(tmp_path, doc))
    assert t.kernels.select("device", "correlation", "blocks_per_sm").row(0) == (0, 12, 0.5)
    assert t.runtime["correlation"].to_list() == [12]


@pytest.mark.parametrize("head,found", [
    (b'{"schemaVersion": 1, "traceEvents": [', True),
    (b'\xef\xbb\xbf{"traceEvents" :\n [', False),  # a BOM: the byte loop handles the head
    (b'{"note": "a \\"traceEvents", "traceEvents": [', False),  # first match in a string
    (b'{"m": {"traceEvents": [1]}, "x": [', False),  # a nested key, not the top object's
    (b'{} {"traceEvents": [', False),  # the top object closed before
    (b'[{"traceEvents": [', False),  # the array format
])
def test_event_array_key_found_without_the_byte_loop(head, found):
    at = jsonbytes.key_array(head, 0, nesting_cap=64)
    assert (at == head.rindex(b"[")) if found else at is None


_EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}'


@pytest.mark.parametrize("doc", [
    b'{"note": "a \\"traceEvents", "traceEvents": [' + _EVENT + b"]}",
    b'{"m": {"traceEvents": [1]}, "traceEvents": [' + _EVENT + b"]}",
])
def test_decoy_keys_before_the_event_array(doc):
    scan = jsonscan.Scan(io.BytesIO(doc), chunk_bytes=16)  # the head arrives in pieces
    events = b"".join(b.ndjson for b in scan.batches())
    assert json.loads(events)["name"] == "a"
    envelope = json.loads(scan.envelope)
    assert envelope["traceEvents"] == []
    assert "note" in envelope or envelope["m"] == {"traceEvents": [1]}


@pytest.mark.parametrize("indent", [2, None])
def test_truncated_array_says_where(tmp_path, indent):
    """A copy cut short: one line that says where the file ends (events when the scan counted
    them, else the byte: the separator fast path leaves counting to the parser)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
               "dur": 1} for i in range(3000)]
    text = json.dumps({"traceEvents": events}, indent=indent)
    path = tmp_path / "cut.json"
    path.write_text(text[:len(text) // 2])
    with pytest.raises(InputError) as err:
        read_kineto(path)
    message = str(err.value)
    assert "truncated: the file ends inside the event array" in message
    assert "copied or written only in part?" in message and "\n" not in message
    assert (f"at byte {len(text) // 2:,} of its JSON" in message) if indent else \
        re.search(r"after [\d,]+ events", message)


def test_a_lean_read_leaves_out_only_what_no_analyzer_reads():
    path = shared_path("traces", "kineto", "hta-trace_diff-control-control.json.gz")
    full = read_kineto(path)
    lean = read_kineto(path, lean=True)
    assert full.flows.height == 34142  # its "s"/"f" async_cpu_to_gpu events, by json.loads
    assert lean.flows.height == 0 and lean.flows.schema == full.flows.schema
    assert full.runtime["tid"].null_count() == 0
    assert lean.runtime.schema == full.runtime.schema
    for col in ("pid", "tid", "api"):
        assert lean.runtime[col].null_count() == lean.runtime.height == full.runtime.height
    assert lean.runtime.drop("pid", "tid", "api").equals(full.runtime.drop("pid", "tid", "api"))
    for name in KINETO_FRAMES:
        if name not in ("flows", "runtime"):
            assert getattr(lean, name).equals(getattr(full, name)), name
    assert lean.meta == full.meta


def test_the_analysis_reads_lean_and_the_python_api_reads_all(tmp_path):
    import rightsize
    from rightsize.pipeline import run

    path = two_step_trace().write(tmp_path / "t.json")
    result = run([path], frames=True).analysis
    assert result is not None
    lean = result.ranks[0].trace
    assert lean.flows.height == 0 and lean.runtime["tid"].null_count() == lean.runtime.height > 0
    full = rightsize.analyze(path).ranks[0]
    assert full.frame("flows").height == read_kineto(path).flows.height > 0
    assert full.frame("runtime")["tid"].null_count() == 0


@pytest.mark.parametrize("name", [
    "hta-trace_diff-control-control.json.gz",
    "kineto-tb_plugin-resnet50_num_workers_0-worker0.1623143089861.pt.trace.json.gz",
    "tracelens-h100-Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
])
def test_what_a_lean_read_leaves_out_changes_no_number(name):
    from rightsize.pipeline import Options, analyze_document

    path = shared_path("traces", "kineto", name)
    lean = analyze_document([path], Options(lean=True)).to_json()
    full = analyze_document([path], Options(lean=False)).to_json()
    assert lean == full


def test_every_category_has_a_kind_and_host_events_keep_file_order():
    """split_events partitions by a one-byte kind looked up from the categories as written:
    every role of the category table has one, case does not matter, and cpu ops, annotations
    and Python calls stay one piece in file order (ties in time are broken by that order)."""
    import polars as pl

    from rightsize.traces import kineto_frames as kf

    assert set(kf.CATS.values()) - kf._HOST_ROLES <= set(kf._KINDS)
    lines = [
        {"ph": "X", "cat": "user_annotation", "name": "step part", "pid": "1", "tid": "1",
         "ts": "5", "dur": "9"},
        {"ph": "X", "cat": "CPU_OP", "name": "aten::mm", "pid": "1", "tid": "1", "ts": "5",
         "dur": "4"},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": "1", "tid": "1", "ts": "5",
         "dur": "1"},
        {"ph": "X", "cat": "Kernel", "name": "k", "pid": "0", "tid": "stream 7", "ts": "6",
         "dur": "1"},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": "1", "tid": "1",
         "ts": "5", "dur": "1"},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": "0",
         "tid": "stream 7", "ts": "7", "dur": "1"},
        {"ph": "X", "cat": "no such category", "name": "x", "pid": "1", "tid": "1", "ts": "5",
         "dur": "1"},
    ]
    ndjson = "\n".join(json.dumps(line) for line in lines).encode()
    frames = kf.split_events(pl.read_ndjson(ndjson, schema=kf.event_schema(typed=False)))
    assert sorted(frames) == ["cpu_ops", "kernels", "runtime", "transfers"]
    assert frames["cpu_ops"]["name"].to_list() == ["step part", "aten::mm", "f"]
    assert frames["cpu_ops"]["cat"].to_list() == ["user_annotation", "cpu_op", "python_function"]
    assert frames["runtime"]["api"].to_list() == ["driver"]
    assert frames["transfers"]["kind"].to_list() == ["memset"]
    assert frames["kernels"]["stream"].to_list() == [7]  # from "stream 7": no stream arg
