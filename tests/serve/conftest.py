"""Fixtures of the serve tests: one module-scoped server with a 4 MiB upload cap."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")
pytest.importorskip("python_multipart", reason="the serve extra is not installed")

from tests.serve.serving import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("serve"), ("--max-upload-mb", "4")).start()
    yield srv
    srv.stop()
