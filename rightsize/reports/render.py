"""The analysis report's renderer (:mod:`rightsize.reports.renderer`'s protocol): html, json
and text, each taking the same report model.

Input: the typed analysis document (and the run manifest) -> :func:`rightsize.reports.model.build_model`.
Output: a string per format, or a file written by :func:`write_report`, which never replaces an
existing file unless ``force`` (it raises :class:`~rightsize.errors.OutputExistsError`).
``json`` is the documented ``rightsize analyze`` contract: the analysis document itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import OutputExistsError
from rightsize.reports.renderer import Style, dumps, render_as

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document
    from rightsize.reports.model import ReportModel

DEFAULT_HTML = "rightsize-report.html"  # beside the user when the inputs are trace files


class AnalysisRenderer:
    """The analysis report (``analyze``, ``report``, ``run``, serve's pages): its
    :class:`~rightsize.reports.model.ReportModel` as text, the document, or the page."""

    def text(self, model: ReportModel, style: Style) -> str:
        from rightsize.reports.text import render_model

        return render_model(model, color=style.color)

    def json(self, model: ReportModel) -> Any:
        return model.document.to_json()

    def html(self, model: ReportModel) -> str:
        from rightsize.reports.html import render_html  # jinja2 only when a page is made

        return render_html(model)


ANALYSIS = AnalysisRenderer()


def format_for(path: str | Path) -> str:
    """The format a file name asks for: .json, .txt/.text, else html."""
    suffix = Path(path).suffix.lower()
    return {".json": "json", ".txt": "text", ".text": "text"}.get(suffix, "html")


def render(
    doc: Document,
    fmt: str = "html",
    manifest: Mapping[str, Any] | None = None,
    color: bool = False,
) -> str:
    if fmt == "json":  # the document itself: no report model (nor its modules) to build
        return dumps(doc.to_json())
    from rightsize.reports.model import build_model

    return render_as(ANALYSIS, build_model(doc, manifest), fmt, Style(color=color))


def write_report(
    doc: Document,
    path: str | Path,
    force: bool = False,
    manifest: Mapping[str, Any] | None = None,
    fmt: str | None = None,
) -> Path:
    """Render ``doc`` to ``path`` (format from ``fmt``, else from the suffix) and return it.

    The file appears whole or not at all (written beside it, then renamed).
    """
    target = Path(path)
    if target.exists() and not force:
        raise OutputExistsError(target)
    from rightsize.rundir import write_text_atomic

    write_text_atomic(target, render(doc, fmt or format_for(target), manifest), mkdir=True)
    return target


def default_html_path(paths: list[Path], output: Path | None = None) -> Path:
    """Where a report goes when nobody said: beside ``-o``, in the one run directory, or in the
    current directory named after the input (``t.pt.trace.json.gz`` ->
    ``t.pt.trace.rightsize.html``; several inputs add ``+N``), so another input never lands on
    the same page."""
    from rightsize.rundir import REPORT_HTML, is_run_dir

    if output is not None:
        return output.parent / REPORT_HTML
    if len(paths) == 1 and is_run_dir(paths[0]):
        return Path(paths[0]) / REPORT_HTML
    if not paths:
        return Path(DEFAULT_HTML)
    more = f"+{len(paths) - 1}" if len(paths) > 1 else ""
    return Path(f"{input_stem(Path(paths[0]))}{more}.rightsize.html")


def input_stem(path: Path) -> str:
    """A file or directory name without ``.gz``/``.json``/``.sqlite``/``.csv``."""
    name = Path(os.path.abspath(path)).name or "trace"
    for suffix in (".gz", ".json", ".sqlite", ".csv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "trace"


def summary(
    doc: Document,
    report_path: str | Path | None = None,
    manifest: Mapping[str, Any] | None = None,
    color: bool = False,
) -> str:
    """The compact terminal summary for the end of ``run``/``analyze``/``report``."""
    from rightsize.reports.model import build_model
    from rightsize.reports.text import render_summary

    return render_summary(build_model(doc, manifest), report_path, color=color)
