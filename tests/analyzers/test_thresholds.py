"""The one threshold table (rightsize/analyzers/thresholds.py): every threshold has its reason
and label, the reports' labels come from it, and the docs pages are checked against it."""

from __future__ import annotations

import dataclasses
import re

from rightsize.analyzers import thresholds as th
from rightsize.reports import labels
from tests.conftest import REPO


def test_every_threshold_has_a_value_a_reason_and_a_label():
    names = []
    for group in th.TABLE:
        for f in dataclasses.fields(group):
            assert isinstance(getattr(group, f.name), int | float), f.name
            assert len(f.metadata[th.WHY]) > 15 and f.metadata[th.LABEL], f.name
            names.append(f"{type(group).__name__}.{f.name}")
    assert len(names) == len(set(names)) == 53


def test_the_docs_page_is_the_table():
    page = (REPO / "docs" / "thresholds.md").read_text()
    assert page == th.markdown(), "regenerate: python -m rightsize.analyzers.thresholds " \
                                  "> docs/thresholds.md"


def test_the_diagnosis_page_quotes_the_table():
    """docs/diagnosis.md's inconclusive rules: each row's first threshold name and its value."""
    text = (REPO / "docs" / "diagnosis.md").read_text()
    table = text[text.index("| rule | threshold | why |"):]
    table = table[:table.index("\n\n")]
    checked = 0
    for rule, value in re.findall(r"^\| (.+?) \| (.+?) \|", table, re.MULTILINE)[1:]:
        named = [n for n in re.findall(r"`([a-z_]+)`", rule) if hasattr(th.DIAGNOSIS, n)]
        if named:
            want = f"{getattr(th.DIAGNOSIS, named[0]):g}"
            assert re.match(rf"{want}\b", value), (named[0], value)
            checked += 1
    assert checked == 6


def test_report_labels_come_from_the_table():
    assert labels.threshold("work_bound_pct") == th.label(th.DiagnosisThresholds,
                                                          "work_bound_pct") \
        == "Work bounds the step from (% of the step busy)"
    assert labels.threshold("new_key_pct") == "New key (%)"  # a newer document's key: words


def test_the_document_publishes_the_diagnosis_group_only():
    assert list(th.DIAGNOSIS.as_dict()) == [
        "work_bound_pct", "dataloader_pct", "communication_pct", "gpu_util_pct",
        "disagreement_pct", "tiny_op_us", "cpu_ridge_flops_per_byte", "min_recorded_pct",
        "startup_pct", "min_ops_kept_pct", "max_sampled_in_sequence_pct", "min_ops_kept_cut_pct",
        "min_kernels", "signals_disagree_pct", "min_nvml_samples"]
