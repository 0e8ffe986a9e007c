"""Property-based fuzzing of every reader (issue 12): Kineto JSON, nsys SQLite, ncu CSV,
nvidia-smi/dcgm-exporter/dcgmi logs, run directories, the catalog and the HF-config reader.
Oracle in :mod:`tests.fuzz.harness`: exit 0 with strict JSON or one line and exit 1; inputs
unchanged; memory capped. Bounded: ``RIGHTSIZE_FUZZ_EXAMPLES`` cases per property (40)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SAMPLES
from tests.fuzz.harness import FUZZ, analyze_json, run_cli, strict_json
from tests.nsys_handmade import make_export
from tests.tracebuilder import two_step_trace

# -- values a hostile file may hold --------------------------------------------------------
NASTY_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
                     max_size=40) | st.sampled_from(
    ["\x1b[2J", "\x1b]52;c;QQ==\x07", "\u202e", "ProfilerStep#1", ("Memcpy HtoD (Pageable -> "
     "Device)"), "kernel", "cuda_runtime", "cpu_op", "gpu_memcpy", "user_annotation", ""])
NUMBERS = (st.integers(min_value=-(1 << 70), max_value=1 << 70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0, 1, -1]))
JSON_SCALARS = st.none() | st.booleans() | NUMBERS | NASTY_TEXT
JSON_VALUES = st.recursive(JSON_SCALARS, lambda c: st.lists(c, max_size=4)
                           | st.dictionaries(NASTY_TEXT, c, max_size=4), max_leaves=12)
SPECIAL_NUMBERS = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-0",
                                   "99999999999999999999999", "1.5"])


_SCRATCH: list[Path] = []  # the running test's scratch directories (one per example)


@pytest.fixture(autouse=True)
def _remove_scratch():
    """Every example writes into a fresh directory; they all go when the test ends."""
    yield
    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)


def _tmp(name: str) -> Path:
    """A path named ``name`` in a new directory, removed after the test."""
    _SCRATCH.append(Path(tempfile.mkdtemp(prefix="rightsize-fuzz-")))
    return _SCRATCH[-1] / name


EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "i", "M", "s", "f", "B", "E", "C"]) | NASTY_TEXT,
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "gpu_memcpy", "gpu_memset",
                                "user_annotation", "ac2g", "cpu_instant_event", "Kernel",
                                "Runtime", "Operator", "python_function"]) | NASTY_TEXT,
        "name": NASTY_TEXT, "pid": JSON_SCALARS, "tid": JSON_SCALARS,
        "ts": NUMBERS | NASTY_TEXT, "dur": NUMBERS | NASTY_TEXT, "id": JSON_SCALARS,
        "args": st.dictionaries(st.sampled_from(["correlation", "External id", "device",
                                                 "stream", "bytes", "Bytes", "Total Allocated",
                                                 "grid", "block", "Input Dims", "flops"]),
                                JSON_VALUES, max_size=5),
    })
ENVELOPE = st.fixed_dictionaries({}, optional={
    "deviceProperties": JSON_VALUES, "distributedInfo": JSON_VALUES,
    "baseTimeNanoseconds": JSON_SCALARS, "schemaVersion": JSON_SCALARS})


@FUZZ
@given(events=st.lists(EVENT, max_size=12), envelope=ENVELOPE, gz=st.booleans(),
       special=st.none() | SPECIAL_NUMBERS)
def test_kineto_documents(events, envelope, gz, special):
    doc = dict(envelope, traceEvents=events + two_step_trace().document()["traceEvents"][:3])
    text = json.dumps(doc)
    if special is not None:  # a non-JSON number where the envelope's base time goes
        text = text[:-1] + f', "baseTimeNanoseconds": {special}}}'
    data = gzip.compress(text.encode()) if gz else text.encode()
    path = _tmp("t.json.gz" if gz else "t.json")
    path.write_bytes(data)
    analyze_json(path)


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for pos, bit in flips:
        out[pos % len(out)] ^= 1 << bit
    return bytes(out[:cut]) if cut is not None else bytes(out)


FLIPS = st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 7)), max_size=8)


@FUZZ
@given(flips=FLIPS, cut=st.none() | st.integers(0, 4000), gz=st.booleans())
def test_kineto_bytes_mutated(flips, cut, gz):
    raw = json.dumps(two_step_trace().document(), indent=1).encode()
    data = _mutate(gzip.compress(raw) if gz else raw, flips, cut)
    path = _tmp("t.json")
    path.write_bytes(data)
    analyze_json(path)


@FUZZ
@given(flips=FLIPS.filter(bool), cut=st.none() | st.integers(0, 40000))
def test_nsys_bytes_mutated(flips, cut):
    base = make_export(_tmp("base.sqlite"))
    path = base.with_name("r.sqlite")
    path.write_bytes(_mutate(base.read_bytes(), [(100 + p, b) for p, b in flips], cut))
    analyze_json(path)


NSYS_CELLS = st.sampled_from(["text", -1, 1 << 62, 0, None, 1.5, b"\xff\xfe"])


@FUZZ
@given(table=st.sampled_from(["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                              "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds",
                              "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME"]),
       value=NSYS_CELLS, column_index=st.integers(0, 20))
def test_nsys_values_of_the_wrong_type(table, value, column_index):
    path = make_export(_tmp("r.sqlite"))
    conn = sqlite3.connect(path)
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    if cols:
        col = cols[column_index % len(cols)]
        try:
            conn.execute(f'UPDATE "{table}" SET "{col}" = ?', (value,))
        except sqlite3.IntegrityError:  # an INTEGER PRIMARY KEY takes integers only
            conn.execute(f'UPDATE "{table}" SET "{col}" = "{col}" + 1000')
        conn.commit()
    conn.close()
    analyze_json(path)


NCU_HEADER = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"',
              '"Context"', '"Stream"', '"Block Size"', '"Grid Size"', '"Device"', '"CC"',
              '"Section Name"', '"Metric Name"', '"Metric Unit"', '"Metric Value"']
CSV_CELL = (NASTY_TEXT | SPECIAL_NUMBERS | st.sampled_from(
    ["(128, 1, 1)", "(99999999999999999999999, 2, 1)", "Duration", "nsecond", "msecond",
     "DRAM Throughput", "%", "0", "1,024.5", "n/a"])).map(lambda s: s.replace('"', '""'))


@FUZZ
@given(rows=st.lists(st.lists(CSV_CELL, min_size=15, max_size=15), max_size=6))
def test_ncu_csv(rows):
    path = _tmp("ncu.csv")
    body = [",".join(NCU_HEADER)] + [",".join(f'"{c}"' for c in r) for r in rows]
    path.write_text("\n".join(body) + "\n")
    analyze_json(path)


PROM_NAME = st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                             "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_POWER_USAGE",
                             "dcgm_gpu_utilization"])
LABEL_VALUE = (NASTY_TEXT | st.sampled_from(["0", "1", "\u00b2", "99999999999", "-1"])).map(
    lambda s: s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " "))


@FUZZ
@given(lines=st.lists(st.tuples(PROM_NAME, st.dictionaries(
    st.sampled_from(["gpu", "UUID", "GPU_I_ID", "minor_number", "x"]), LABEL_VALUE, max_size=4),
    SPECIAL_NUMBERS | st.sampled_from(["50", "0.5", "-3"]),
    st.none() | st.sampled_from(["1700000000000", "-5", "99999999999999999999"])),
    min_size=1, max_size=8))
def test_dcgm_exporter(lines):
    text = "\n".join(
        f"{n}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in labels.items())}}} {value}"
        + (f" {ts}" if ts else "") for n, labels, value, ts in lines) + "\n"
    path = _tmp("scrape.prom")
    path.write_text(text)
    analyze_json(path)


@FUZZ
@given(rows=st.lists(st.lists(CSV_CELL | st.sampled_from(
    ["2024/01/01 10:00:00.000", "NVIDIA H100", "[N/A]", "45 %", "1024 MiB", "250.00 W"]),
    min_size=5, max_size=5), max_size=6))
def test_nvidia_smi_csv(rows):
    header = "timestamp, name, utilization.gpu [%], memory.used [MiB], power.draw [W]"
    path = _tmp("smi.csv")
    path.write_text(header + "\n" + "\n".join(", ".join(r) for r in rows) + "\n")
    analyze_json(path)


@FUZZ
@given(rows=st.lists(st.lists(st.sampled_from(["GPU", "GPU-I", "0", "1", "\u00b2", "N/A",
                                               "0.5", "NaN", "inf", "999999999999"]),
                              min_size=2, max_size=5), max_size=6))
def test_dcgmi_dmon(rows):
    path = _tmp("dmon.log")
    path.write_text("#Entity   SMACT  DRAMA  POWER\nID\n"
                    + "\n".join(" ".join(r) for r in rows) + "\n")
    analyze_json(path)


RUN = SAMPLES / "runs" / "train_compute-cpu"


def _paths(obj, pre=()):
    yield pre
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*pre, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield from _paths(v, (*pre, i))


@FUZZ
@given(which=st.sampled_from(["analysis.json", "manifest.json"]), pick=st.integers(0, 10_000),
       value=JSON_SCALARS | st.just([]) | st.just({}), fmt=st.sampled_from(["json", "text"]))
def test_run_directory_fields_of_the_wrong_type(which, pick, value, fmt):
    run = _tmp("run")
    shutil.copytree(RUN, run)
    doc = json.loads((run / which).read_text())
    paths = [p for p in _paths(doc) if p]
    target = paths[pick % len(paths)]
    holder = doc
    for key in target[:-1]:
        holder = holder[key]
    holder[target[-1]] = value
    (run / which).write_text(json.dumps(doc))
    code, stdout, _ = run_cli(["report", str(run), "--format", fmt, "-q"], [run])
    if code == 0 and fmt == "json":
        strict_json(stdout)


CATALOG_CELL = SPECIAL_NUMBERS | NASTY_TEXT.map(lambda s: s.replace(",", " ").replace("\n", " "))


@FUZZ
@given(cells=st.lists(CATALOG_CELL, min_size=4, max_size=4), as_json=st.booleans())
def test_catalog_files(cells, as_json):
    path = _tmp("catalog.json" if as_json else "catalog.csv")
    if as_json:
        path.write_text(json.dumps({"gpus": [dict(zip(
            ["name", "memory_gb", "memory_bandwidth_gbs", "fp32_tflops"], cells, strict=True))]}))
    else:
        path.write_text("name,memory_gb,memory_bandwidth_gbs,fp32_tflops\n" + ",".join(cells)
                        + "\n")
    code, stdout, _ = run_cli(["gpus", "--catalog", str(path), "--format", "json"], [path])
    if code == 0:
        strict_json(stdout)


@FUZZ
@given(config=st.dictionaries(st.sampled_from(
    ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
     "intermediate_size", "vocab_size", "max_position_embeddings", "model_type", "head_dim",
     "torch_dtype", "text_config", "tie_word_embeddings"]), JSON_VALUES, max_size=8))
def test_hf_config_reader(config):
    from rightsize.analyzers.sizing.hf_config import from_hf_config
    from rightsize.errors import RightsizeError

    try:
        from_hf_config(config, "fuzz")
    except RightsizeError as exc:
        assert "\n" not in str(exc)
