"""The run-directory contract: manifest versioning, one-line errors, file names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.errors import OutputExistsError, RunDirError
from rightsize.rundir import (
    SCHEMA_VERSION,
    create_run_dir,
    default_run_dir,
    parse_trace_name,
    read_manifest,
    trace_name,
    write_manifest,
)


def test_manifest_round_trip(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"status": "done", "exit": {"code": 0}})
    assert read_manifest(tmp_path) == {
        "schema_version": SCHEMA_VERSION,
        "status": "done",
        "exit": {"code": 0},
    }
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temporary left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "{d}: not a rightsize run directory (no manifest.json)"),
        ("{not json", "{d}/manifest.json: unreadable manifest (JSONDecodeError)"),
        ("[1]", "{d}/manifest.json: corrupt manifest (not a JSON object)"),
        (
            '{"schema_version": "1"}',
            "{d}/manifest.json: corrupt manifest (no integer schema_version)",
        ),
        (
            '{"schema_version": 99}',
            (
                f"{{d}}: run directory schema_version 99 is newer than this rightsize supports "
                f"({SCHEMA_VERSION}); upgrade rightsize to read it"
            ),
        ),
    ],
)
def test_bad_manifests_give_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(RunDirError) as err:
        read_manifest(tmp_path)
    assert str(err.value) == message.format(d=tmp_path)
    assert "\n" not in str(err.value)


def test_trace_names_show_rank_and_pid() -> None:
    assert trace_name(0, 1234) == "rank0.pid1234.pt.trace.json.gz"
    assert trace_name(3, 77, window=2) == "rank3.pid77.w2.pt.trace.json.gz"
    assert parse_trace_name("rank3.pid77.w2.pt.trace.json.gz") == (3, 77, 2)
    assert parse_trace_name("rank0.pid1234.pt.trace.json") == (0, 1234, 1)
    assert parse_trace_name("other.json") is None


def test_run_directories_are_never_reused(tmp_path: Path) -> None:
    first = default_run_dir("my train!", "20250101-000000", base=tmp_path)
    assert first == tmp_path / "my_train-20250101-000000"
    create_run_dir(first)
    assert sorted(p.name for p in first.iterdir()) == ["procs", "samples", "traces"]
    write_manifest(first, {})
    second = default_run_dir("my train!", "20250101-000000", base=tmp_path)
    assert second == tmp_path / "my_train-20250101-000000-2"
    with pytest.raises(OutputExistsError):
        create_run_dir(first)
    assert json.loads((first / "manifest.json").read_text()) == {"schema_version": 1}


def test_manifest_and_analysis_modes_follow_the_umask(tmp_path: Path) -> None:
    import os

    from rightsize.rundir import write_json_atomic

    old = os.umask(0o022)
    try:
        write_manifest(tmp_path, {"status": "done"})
        write_json_atomic(tmp_path / "analysis.json", {"schema_version": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "manifest.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "analysis.json").stat().st_mode & 0o777 == 0o644
