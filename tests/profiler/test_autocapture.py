"""The ``--auto`` policy on step times worked by hand, and the option parsers."""

from __future__ import annotations

import pytest

from rightsize.cli.run_ondemand import parse_duration_s, parse_pct
from rightsize.errors import RightsizeError
from rightsize.profiler.autocapture import AutoPolicy, Last, decide, held_back, pace
from rightsize.profiler.upload import _outcome

POLICY = AutoPolicy(window=10, tolerance_pct=5.0, every_s=600.0, drift_pct=10.0, max_captures=3,
                    max_bytes=1000)


def test_pace_needs_a_full_window_without_profiled_steps() -> None:
    assert pace([0.1] * 9, 9, POLICY) == pace([0.1] * 9, 9, POLICY)
    assert pace([0.1] * 9, 9, POLICY).steady is False  # warming up: 9 of 10 steps
    assert pace([0.1] * 9 + [None], 12, POLICY).median_s is None  # a profiled step in it
    steady = pace([0.5, 0.5] + [0.1] * 10, 12, POLICY)  # only the last 10 count
    assert (steady.steady, steady.median_s, steady.within_pct) == (True, 0.1, 100.0)


def test_pace_tolerates_one_step_in_ten() -> None:
    # median 0.100; 0.104 and 0.096 are within 5%, 0.2 is not: 9 of 10 = 90% -> steady
    one_off = pace([0.1, 0.104, 0.096, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1], 10, POLICY)
    assert (one_off.steady, one_off.median_s, one_off.within_pct) == (True, 0.1, 90.0)
    # two outliers (0.2, 0.106): 8 of 10 -> not steady
    two = pace([0.1, 0.106, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1], 10, POLICY)
    assert (two.steady, two.within_pct) == (False, 80.0)


def test_decide() -> None:
    steady = pace([0.1] * 10, 100, POLICY)
    slower = pace([0.111] * 10, 200, POLICY)  # +11% > 10%
    assert decide(pace([0.1] * 5, 5, POLICY), None, 0, 0, 0.0, POLICY) is None
    assert decide(steady, None, 0, 0, 0.0, POLICY) == "steady"
    last = Last(at_s=0.0, median_s=0.1)
    assert decide(steady, last, 1, 0, 599.0, POLICY) is None
    assert decide(steady, last, 1, 0, 600.0, POLICY) == "every"
    assert decide(slower, last, 1, 0, 10.0, POLICY) == "drift"
    assert decide(pace([0.109] * 10, 200, POLICY), last, 1, 0, 10.0, POLICY) is None  # +9%
    assert decide(pace([0.089] * 10, 200, POLICY), last, 1, 0, 10.0, POLICY) == "drift"  # -11%
    assert decide(slower, last, 3, 0, 10.0, POLICY) is None  # --max-captures
    assert decide(slower, last, 1, 1000, 10.0, POLICY) is None  # the disk budget
    assert held_back(3, 0, POLICY) == "--max-captures 3 reached"
    assert held_back(1, 2 << 20, AutoPolicy(max_bytes=1 << 20)) == (
        "the captures use 2 MiB, the disk budget (--max-capture-mb) is 1 MiB")
    assert held_back(1, 0, POLICY) is None


@pytest.mark.parametrize(("text", "seconds"), [
    ("30m", 1800.0), ("90s", 90.0), ("2h", 7200.0), ("1.5h", 5400.0), ("45", 45.0),
    ("off", None), ("0", None)])
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration_s(text, "--every") == seconds


def test_bad_values_are_one_line_errors() -> None:
    with pytest.raises(RightsizeError, match=r"^--every 5x: expected a duration"):
        parse_duration_s("5x", "--every")
    assert parse_pct("10%", "--drift") == 10.0 and parse_pct("off", "--drift") is None
    with pytest.raises(RightsizeError, match=r"^--drift -3%: expected a percentage"):
        parse_pct("-3%", "--drift")


@pytest.mark.parametrize(("status", "sent", "final"), [
    (201, True, True), (200, True, True),  # new, or the same files again
    (503, False, False), (500, False, False), (429, False, False), (408, False, False),
    (401, False, True), (400, False, True), (413, False, True)])
def test_upload_outcomes(status: int, sent: bool, final: bool) -> None:
    outcome = _outcome(status, '{"error": "x"}', "7")
    assert (outcome.sent, outcome.final) == (sent, final)
    if not sent:
        assert outcome.message == f'HTTP {status}: {{"error": "x"}}'
    if not final:
        assert outcome.retry_after_s == 7.0


def test_kubernetes_labels_name_the_workload_as_fleet_metrics_does(tmp_path) -> None:
    from rightsize.cli.run_ondemand import kubernetes

    sa = tmp_path / "namespace"
    assert kubernetes(None, {"HOSTNAME": "trainer-7d9f8b6c4d-x2x9z"}, str(sa)) == {}  # not K8s
    sa.write_text("ml\n")
    # a Deployment's pod, a StatefulSet's (a PyTorchJob's worker), POD_NAMESPACE first
    assert kubernetes(None, {"HOSTNAME": "trainer-7d9f8b6c4d-x2x9z"}, str(sa)) == {
        "namespace": "ml", "workload": "trainer", "pod": "trainer-7d9f8b6c4d-x2x9z"}
    assert kubernetes(None, {"POD_NAMESPACE": "vision", "POD_NAME": "resnet-worker-3"},
                      str(sa)) == {"namespace": "vision", "workload": "resnet-worker",
                                   "pod": "resnet-worker-3"}
    assert kubernetes("ml/llm", {}, str(sa)) == {"namespace": "ml", "workload": "llm"}
    with pytest.raises(RightsizeError, match=r"^--workload llm: expected NAMESPACE/NAME$"):
        kubernetes("llm", {}, str(sa))
