"""Analyzer sections plug in: a new analyzer is its module plus one entry in SECTIONS.

The toy section below lives in a module written at test time (so it touches no file of the
package) and is registered by one list entry; the analysis, the JSON document, reading it back,
the HTML and the text report all carry it with nothing else changed.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from rightsize.analyzers import sections
from rightsize.analyzers.analysis import Analysis, Context, RankAnalysis, analyze_trace
from rightsize.analyzers.document import Document
from rightsize.analyzers.document.build import document
from rightsize.catalog import load_catalog
from rightsize.reports.render import render
from tests.framebuilder import FrameBuilder

TOY = '''
"""A toy analyzer: the longest kernel launches, one row each."""
from rightsize.analyzers.sections import SectionInput
from rightsize.node import Node, node, num


@node
class LongKernel(Node):
    name: str
    dur_ms: float = num(3)


def longest(rank: SectionInput) -> tuple[LongKernel, ...] | None:
    k = rank.trace.kernels
    if rank.device is None or k.height == 0:
        return None
    top = k.sort("dur_ns", descending=True).head(2)
    return tuple(LongKernel(n, d / 1e6) for n, d in top.select("name", "dur_ns").iter_rows())
'''

ENTRY = sections.Section(
    key="long_kernels", title="Longest kernel launches",
    compute="toy_section:longest", node="toy_section:LongKernel", many=True,
    needs=("device_use",), frames=("kernels",),
    columns=(sections.Column("Kernel", "name"), sections.Column("Time (ms)", "dur_ms", "{:.3f}")),
)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_section.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sections, "SECTIONS", [*sections.SECTIONS, ENTRY])


def _trace():
    b = FrameBuilder()
    b.step(1, 0, 1000).op("aten::mm", 10, 500, ext=1)
    b.launch("cudaLaunchKernel", 20, 5, corr=1).kernel("gemm_a", 100, 300, corr=1, ext=1)
    b.launch("cudaLaunchKernel", 30, 5, corr=2).kernel("gemm_b", 500, 123.4567, corr=2, ext=1)
    b.launch("cudaLaunchKernel", 40, 5, corr=3).kernel("copy_c", 700, 10, corr=3, ext=1)
    return b.trace()


def test_a_registered_section_reaches_the_document_and_reads_back(toy):
    rank = analyze_trace(_trace(), Context(catalog=load_catalog()))
    assert list(rank.values)[-2:] == ["self_ops", "long_kernels"]
    doc = document(Analysis((rank,)), [])
    data = doc.to_json()
    keys = list(data)
    assert keys[keys.index("notes") + 1:] == ["self_ops", "long_kernels", "host_timeline"]
    assert data["long_kernels"] == [{"name": "gemm_a", "dur_ms": 0.3},
                                    {"name": "gemm_b", "dur_ms": 0.123}]
    back = Document.from_json(json.loads(json.dumps(data)))
    assert back == doc and back.sections["long_kernels"][1].name == "gemm_b"
    assert type(back.sections["long_kernels"][0]).__name__ == "LongKernel"


def test_a_registered_section_is_a_table_in_the_reports(toy):
    doc = document(Analysis((analyze_trace(_trace(), Context(catalog=load_catalog())),)), [])
    page = render(doc, "html")
    table = page[page.index('<section id="section-long_kernels">'):]
    table = table[:table.index("</section>")]
    assert "<h2>Longest kernel launches</h2>" in table
    assert "<td>gemm_b</td><td>0.123</td>" in table
    text = render(doc, "text")
    assert "Longest kernel launches" in text and "gemm_a  0.300" in text


def test_a_document_without_the_section_reads_and_rows_without_a_value_are_empty(toy):
    rank = analyze_trace(_trace(), Context(catalog=load_catalog()))
    data = document(Analysis((rank,)), []).to_json()
    del data["long_kernels"]
    assert "long_kernels" not in Document.from_json(data).sections
    cpu = FrameBuilder().step(1, 0, 100).op("aten::add", 10, 50).trace()
    assert analyze_trace(cpu, Context()).values["long_kernels"] == ()  # None: no rows


def test_the_registry_names_importable_functions_and_node_classes():
    fields = {f.name for f in Document.__dataclass_fields__.values()}
    for s in sections.SECTIONS:
        assert callable(s.function()) and s.key not in fields
        assert s.node is None or isinstance(s.node_class(), type)
        assert set(s.needs) <= {t.key for t in sections.SECTIONS}


def test_the_headline_keys_come_from_the_registry_in_its_order():
    head = [s.key for s in sections.SECTIONS if s.head]
    assert head == ["steps", "metrics", "diagnosis", "recommendations", "sizing", "precision",
                    "timeline", "top_kernels", "top_ops"]
    data = document(Analysis((analyze_trace(_trace(), Context(catalog=load_catalog())),)),
                    []).to_json()
    keys = list(data)
    assert keys[keys.index("devices") + 1:keys.index("ranks")] == head
    assert sections.required_keys() == frozenset(head)


CLASSES = '''
"""A toy analyzer that reads another section's value: kernel time by the diagnosis' class."""
import polars as pl

from rightsize.analyzers.sections import SectionInput
from rightsize.node import Node, node, num


@node
class ClassTime(Node):
    work: str
    ms: float = num(2)


def by_class(rank: SectionInput) -> tuple[ClassTime, ...]:
    w = rank.work  # the "verdict" section's classified work: declared in needs
    if w is None or w.height == 0:
        return ()
    by = w.group_by("work").agg(pl.col("dur_ns").sum()).sort("work")
    return tuple(ClassTime(k, ns / 1e6) for k, ns in by.iter_rows())


def undeclared(rank: SectionInput) -> None:
    return rank["verdict"]
'''


@pytest.fixture
def toys(tmp_path, monkeypatch):
    (tmp_path / "toy_classes.py").write_text(textwrap.dedent(CLASSES))
    monkeypatch.syspath_prepend(str(tmp_path))
    # listed first: it still runs after the sections it needs
    entry = sections.Section(key="class_time", compute="toy_classes:by_class",
                             node="toy_classes:ClassTime", many=True, needs=("verdict",),
                             head=True)
    monkeypatch.setattr(sections, "SECTIONS", [entry, *sections.SECTIONS])


def test_a_section_reads_the_sections_it_needs_and_can_stand_in_the_headline(toys):
    rank = analyze_trace(_trace(), Context(catalog=load_catalog()))
    keys = list(rank.values)
    assert keys.index("verdict") < keys.index("class_time")
    data = document(Analysis((rank,)), []).to_json()
    keys = list(data)
    assert keys[keys.index("devices") + 1] == "class_time"  # first in the list: first key
    # the name taxonomy: the two GEMMs compute (0.3 + 0.1234567 ms), the copy kernel memory
    assert data["class_time"] == [{"work": "compute", "ms": 0.42}, {"work": "memory", "ms": 0.01}]
    back = Document.from_json(json.loads(json.dumps(data)))
    assert back.section("class_time") == back.headline["class_time"]
    del data["class_time"]  # a newer section is not required of an older document
    assert Document.from_json(data).section("class_time") == ()


def test_the_registry_order_follows_needs_and_refuses_a_missing_need_or_a_cycle():
    def entry(key, *needs):
        return sections.Section(key=key, compute="x:y", needs=needs)

    assert [s.key for s in sections.order([entry("b", "a"), entry("a")])] == ["a", "b"]
    with pytest.raises(ValueError, match="section 'b' needs 'nope'"):
        sections.order([entry("b", "nope")])
    with pytest.raises(ValueError, match="sections need each other: a -> b -> a"):
        sections.order([entry("a", "b"), entry("b", "a")])


def test_a_value_not_declared_in_needs_cannot_be_read(tmp_path, monkeypatch):
    (tmp_path / "toy_classes.py").write_text(textwrap.dedent(CLASSES))
    monkeypatch.syspath_prepend(str(tmp_path))
    bad = sections.Section(key="bad", compute="toy_classes:undeclared", needs=("step_ranges",))
    monkeypatch.setattr(sections, "SECTIONS", [*sections.SECTIONS, bad])
    with pytest.raises(KeyError, match="'verdict' was not declared in the section's needs"):
        analyze_trace(_trace(), Context())


TIMED = '''
"""Toy sections that finish out of their order: notes and failures must not follow the clock."""
import time


def slow_note(rank):
    time.sleep(0.05)
    rank.note("slow, listed first")
    return 1


def fast_note(rank):
    rank.note("fast, listed second")
    return 2


def sum_of_both(rank):
    return rank["slow"] + rank["fast"]


def slow_fail(rank):
    time.sleep(0.05)
    raise ValueError("the first failure in order")


def fast_fail(rank):
    raise ValueError("a later section's failure")
'''


@pytest.fixture
def timed(tmp_path, monkeypatch):
    (tmp_path / "toy_timed.py").write_text(textwrap.dedent(TIMED))
    monkeypatch.syspath_prepend(str(tmp_path))

    def entry(key, fn, *needs):
        return sections.Section(key=key, compute=f"toy_timed:{fn}", needs=needs)
    return entry


@pytest.mark.parametrize("threads", [1, 2])
def test_sections_on_threads_give_the_values_and_notes_in_registry_order(timed, threads):
    notes: list[str] = []
    values = sections.run([timed("slow", "slow_note"), timed("fast", "fast_note"),
                           timed("sum", "sum_of_both", "slow", "fast")],
                          _trace(), Context(), notes, threads)
    assert values == {"slow": 1, "fast": 2, "sum": 3} and list(values) == ["slow", "fast", "sum"]
    assert notes == ["slow, listed first", "fast, listed second"]


@pytest.mark.parametrize("threads", [1, 2])
def test_sections_on_threads_raise_the_first_failure_in_registry_order(timed, threads):
    notes: list[str] = []
    with pytest.raises(ValueError, match="the first failure in order"):
        sections.run([timed("a", "slow_fail"), timed("b", "fast_fail"),
                      timed("c", "sum_of_both", "a", "b")], _trace(), Context(), notes, threads)


def test_a_rank_on_two_threads_is_the_rank_on_one():
    trace = _trace()
    context = Context(catalog=load_catalog())
    one: list[str] = []
    two: list[str] = []
    a = sections.run(sections.SECTIONS, trace, context, one, 1)
    b = sections.run(sections.SECTIONS, trace, context, two, 2)
    assert list(a) == list(b) and one == two and len(one) > 0
    doc = [document(Analysis((analyze_trace(trace, context),)), []).to_json()]
    for values, notes in ((a, one), (b, two)):
        doc.append(document(Analysis((RankAnalysis(trace, values, tuple(notes)),)),
                            []).to_json())
    assert doc[0] == doc[1] == doc[2]


def test_sections_share_threads_only_where_the_tasks_memory_has_room(tmp_path, monkeypatch):
    import dataclasses

    from rightsize import job_map
    from rightsize.analyzers import analysis
    from rightsize.traces import kineto
    from rightsize.traces.budget import need_for_events
    from rightsize.traces.readers import ReadOptions
    from rightsize.traces.window import StepWindow
    from tests.tracebuilder import two_step_trace

    path = two_step_trace().write(tmp_path / "t.json")
    trace = kineto.read_kineto(path)
    need = need_for_events(kineto.MEMORY, trace.meta.event_count)
    monkeypatch.setattr(analysis, "section_threads", lambda: 2)

    def threads(budget, t=trace):
        task = job_map.TraceTask(str(path), None, ReadOptions(memory_budget_bytes=budget),
                                 analysis.Context())
        return job_map._threads(task, t)

    assert threads(None) == 2 and threads(4 * need) == 2  # 4x the need: room for both
    assert threads(4 * need - 1) == 1
    windowed = dataclasses.replace(trace, meta=dataclasses.replace(
        trace.meta, window=StepWindow(1, 1, 2, None, None, "budget")))
    assert threads(100 * need, windowed) == 1  # a window: the budget is tight already
