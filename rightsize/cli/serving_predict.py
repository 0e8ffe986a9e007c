"""``rightsize serving predict``: TTFT and TPOT of a static batch of equal requests on a
deployment (GPU, tensor and pipeline degrees, weight precision), with ranges.

One point from ``--gpu/--tp/--pp/--batch/--isl/--osl``, or many from ``--points`` (a CSV with
columns ``gpu,tp,batch,isl,osl`` and optionally ``pp``), predicted in order by the step model
(:mod:`rightsize.analyzers.serving.step`). Text, ``--format json`` (``{"predictions":
[...]}``, docs/json-contract.md) or ``--format html`` (one page), through the renderer protocol
(``reports/serving_text.PredictRenderer``); ``--measured`` calibrates the model on your own
measurements first (:mod:`rightsize.cli.serving_measured`). Only click is imported at module
level.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli, read_input_text
from rightsize.cli.estimate import Count, read_hf_config
from rightsize.cli.serving_load import engine_option, precision_option
from rightsize.cli.serving_measured import load_calibration, measured_options

if TYPE_CHECKING:
    from rightsize.analyzers.serving.predict import Point
    from rightsize.analyzers.serving.tables import Tables

POINT_COLUMNS = ("gpu", "tp", "batch", "isl", "osl")

tables_option = click.option(
    "--tables", "tables_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="AIConfigurator systems folder with measured per-operator tables (default: "
         "$RIGHTSIZE_TABLES, the shared folder beside a checkout, else the aiconfigurator-core "
         "package if installed; GPUs without a table get the per-kernel projection).")


def load_tables(path: Path | None) -> Tables:
    """The tables under ``path`` (one-line error when it is not a systems folder), else the
    default ones."""
    from rightsize.analyzers.serving.tables import Tables, default_tables

    if path is None:
        return default_tables()
    return Tables(path)


def read_csv_rows(path: Path, need: tuple[str, ...], what: str) -> list[dict[str, str]]:
    """The rows of a CSV file with at least the columns ``need``; one-line errors naming a
    missing file, missing columns or an empty table."""
    from rightsize.errors import InputError

    reader = csv.DictReader(io.StringIO(read_input_text(path, what, "utf-8-sig")))
    header = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(path, f"the {what} has no column {', '.join(missing)} (it needs"
                         f" {', '.join(need)})")
    rows = [{(k or "").strip(): (v or "").strip() for k, v in r.items()} for r in reader]
    if not rows:
        raise InputError(path, f"the {what} has a header but no rows")
    return rows


def whole(row: dict[str, str], key: str, where: str, default: int | None = None) -> int:
    """A whole number of at least 1 from a CSV cell."""
    from rightsize.errors import RightsizeError

    text = row.get(key, "")
    if not text and default is not None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise RightsizeError(f"{where}: {key} {text!r} is not a number") from None
    if not value.is_integer() or value < 1:
        raise RightsizeError(f"{where}: {key} {text!r} is not a whole number of at least 1")
    return int(value)


def read_points(path: Path) -> list[Point]:
    from rightsize.analyzers.serving.predict import Point

    rows = read_csv_rows(path, POINT_COLUMNS, "points CSV")
    return [Point(r["gpu"], whole(r, "tp", f"{path} row {i}"),
                  whole(r, "pp", f"{path} row {i}", default=1),
                  whole(r, "batch", f"{path} row {i}"), whole(r, "isl", f"{path} row {i}"),
                  whole(r, "osl", f"{path} row {i}"))
            for i, r in enumerate(rows, start=2)]


@click.command()
@click.option("--hf-config", "hf_config", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The served model's Hugging Face config.json.")
@click.option("--gpu", help="Catalog GPU name (rightsize gpus lists them).")
@click.option("--tp", type=Count(), default=1, show_default=True, help="Tensor-parallel GPUs.")
@click.option("--pp", type=Count(), default=1, show_default=True, help="Pipeline stages.")
@click.option("--batch", type=Count(), help="Requests in the static batch.")
@click.option("--isl", type=Count(), help="Prompt tokens per request.")
@click.option("--osl", type=Count(), help="Output tokens per request.")
@click.option("--points", type=click.Path(dir_okay=False, path_type=Path),
              help="CSV of points: gpu,tp,batch,isl,osl (and optionally pp), predicted in order.")
@precision_option
@engine_option
@measured_options
@tables_option
@catalog_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the predictions here instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite --output.")
def predict(hf_config: Path, gpu: str | None, tp: int, pp: int, batch: int | None,
            isl: int | None, osl: int | None, points: Path | None, precision: str, engine: str,
            measured: tuple[str, ...], measured_hf_config: Path | None,
            measured_gpu: str | None, measured_tp: int | None, measured_window: str,
            comm_model: Path | None,
            tables_dir: Path | None, catalog_path: Path | None, fmt: str,
            output: Path | None, force: bool) -> None:
    """TTFT (one prefill of the batch) and TPOT (one decode step) of a static batch."""
    from rightsize.analyzers.serving.predict import Point, predict_points
    from rightsize.analyzers.sizing.hf_config import from_hf_config
    from rightsize.cli.output import write_output
    from rightsize.errors import RightsizeError
    from rightsize.reports.renderer import Style, render_as
    from rightsize.reports.serving_text import PredictRenderer

    if points is not None and any(v is not None for v in (gpu, batch, isl, osl)):
        raise RightsizeError("give either --points or --gpu/--batch/--isl/--osl, not both")
    if points is None:
        absent = [f"--{n}" for n, v in (("gpu", gpu), ("batch", batch), ("isl", isl),
                                        ("osl", osl)) if v is None]
        if absent:
            raise RightsizeError(f"missing {', '.join(absent)} (or give --points CSV)")
        assert gpu and batch and isl and osl
        rows = [Point(gpu, tp, pp, batch, isl, osl)]
    else:
        rows = read_points(points)
    config = from_hf_config(read_hf_config(hf_config), hf_config.stem)
    catalog = load_catalog_for_cli(catalog_path)
    tables = load_tables(tables_dir)
    calibration = load_calibration(measured, measured_hf_config, config, precision, catalog,
                                   tables, measured_gpu, measured_tp, measured_window,
                                   comm_model, engine)
    preds = predict_points(config, rows, precision, calibration=calibration, catalog=catalog,
                           tables=tables, engine=engine)
    inputs = (hf_config, *([points] if points else []))
    write_output(render_as(PredictRenderer(hf_config.stem), preds, fmt, Style()), output, force,
                 inputs)
    if output is not None:
        click.echo(f"wrote {output}", err=True)
