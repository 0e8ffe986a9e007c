"""``--measured``: the user's own serving measurements, turned into a calibration of the step
model. Shared by ``serving predict`` (and ``simulate``/``plan``: :data:`measured_options`,
:func:`load_calibration`).

Each ``--measured`` value is one of:

- a CSV with columns ``gpu,tp,batch,isl,osl,ttft_ms,tpot_ms`` (and optionally ``pp``): static
  batches as serving benchmarks measure them; each row is one prefill (TTFT) and one decode step
  at the mean KV length (TPOT); a cell left empty is not used;
- a Kineto trace of a served model (``.json``/``.json.gz``; vLLM, SGLang or HF ``generate``):
  its prefill and decode steps told apart (:mod:`rightsize.cli.serving_trace`);
- a Prometheus URL (``http(s)://...``) scraping vLLM: the mean decode step over
  ``--measured-window`` (:mod:`rightsize.cli.serving_prometheus`).

``--measured-hf-config`` names the measured model when it is not the predicted one.
Only click is imported at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.factors import Calibration
    from rightsize.analyzers.serving.step import ModelConfig
    from rightsize.analyzers.serving.tables import Tables
    from rightsize.catalog import Catalog

MEASURED_COLUMNS = ("gpu", "tp", "batch", "isl", "osl", "ttft_ms", "tpot_ms")


def measured_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--measured`` (repeatable), ``--measured-hf-config``, and what a trace or Prometheus
    cannot say itself (``--measured-gpu``, ``--measured-tp``, ``--measured-window``)."""
    for opt in reversed((
        click.option("--measured", "measured", multiple=True,
                     help="Your measurements to calibrate on: a CSV (gpu,tp,batch,isl,osl,"
                          "ttft_ms,tpot_ms), a Kineto trace of the served model, or a "
                          "Prometheus URL scraping vLLM. Repeatable."),
        click.option("--measured-hf-config", "measured_hf_config",
                     type=click.Path(dir_okay=False, path_type=Path),
                     help="The measured model's config.json when it is not --hf-config."),
        click.option("--measured-gpu", "measured_gpu",
                     help="GPU of a measured trace or Prometheus (a trace names its own)."),
        click.option("--measured-tp", "measured_tp", type=int, default=None,
                     help="Tensor-parallel degree of a measured trace or Prometheus."),
        click.option("--measured-window", "measured_window", default="1h", show_default=True,
                     help="Prometheus: the window before now to average over (30m, 2h, 1d)."),
        click.option("--comm-model", "comm_model", type=click.Path(dir_okay=False,
                                                                   path_type=Path),
                     default=None, help="A communication model fitted on your own nccl-tests "
                     "logs (rightsize comm fit): it times the tensor-parallel all-reduces."),
    )):
        fn = opt(fn)
    return fn


def _float(row: dict[str, str], key: str, where: str) -> float | None:
    from rightsize.errors import RightsizeError

    text = row.get(key, "")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise RightsizeError(f"{where}: {key} {text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise RightsizeError(f"{where}: {key} {text!r} must be a positive time in ms")
    return value


def read_measured_csv(path: Path, catalog: Catalog, precision: str) -> list[Observation]:
    """Observations of a measured CSV (a prefill and a decode step per row)."""
    from rightsize.analyzers.serving.calibrate import Observation
    from rightsize.analyzers.serving.predict import mean_kv
    from rightsize.analyzers.serving.step import Deployment
    from rightsize.cli.serving_predict import read_csv_rows, whole

    rows = read_csv_rows(path, MEASURED_COLUMNS, "measured CSV")
    out = []
    for i, r in enumerate(rows, start=2):
        where = f"{path} row {i}"
        gpu = catalog.gpu(r["gpu"]).name
        dep = Deployment(gpu, whole(r, "tp", where), whole(r, "pp", where, default=1),
                         precision)
        batch, isl, osl = (whole(r, k, where) for k in ("batch", "isl", "osl"))
        ttft, tpot = _float(r, "ttft_ms", where), _float(r, "tpot_ms", where)
        if ttft is None and tpot is None:
            raise click.UsageError(f"{where}: neither ttft_ms nor tpot_ms is given")
        src = f"{path.name} row {i}"
        if ttft is not None:
            out.append(Observation(dep, ttft, prefill_seqs=batch, prefill_tokens=isl,
                                   source=src))
        if tpot is not None:
            out.append(Observation(dep, tpot, decode_seqs=batch, kv_mean=mean_kv(isl, osl),
                                   source=src))
    return out


def _describe(values: Sequence[str], obs: Sequence[Observation]) -> str:
    gpus = sorted({o.deployment.gpu for o in obs})
    names = ", ".join(Path(v).name if "://" not in v else v for v in values)
    n = len(obs)
    return f"{names}: {n} measured step{'' if n == 1 else 's'} on {', '.join(gpus)}"


def load_calibration(values: Sequence[str], measured_hf_config: Path | None,
                     config: ModelConfig, precision: str, catalog: Catalog, tables: Tables,
                     gpu: str | None = None, tp: int | None = None,
                     window: str = "1h", comm_model: Path | None = None,
                     engine: str = "vllm") -> Calibration | None:
    """The calibration on every ``--measured`` value (measured on ``engine``, the one
    ``--engine`` names), with the ``--comm-model`` file's model for the all-reduces (None when
    there is neither)."""
    import dataclasses

    from rightsize.analyzers.serving.factors import Calibration

    got = _calibration(values, measured_hf_config, config, precision, catalog, tables, gpu, tp,
                       window, engine)
    if comm_model is None:
        return got
    from rightsize.cli.comm import load_comm_model
    return dataclasses.replace(got or Calibration(), comm_model=load_comm_model(comm_model))


def _calibration(values: Sequence[str], measured_hf_config: Path | None,
                 config: ModelConfig, precision: str, catalog: Catalog, tables: Tables,
                 gpu: str | None, tp: int | None, window: str,
                 engine: str) -> Calibration | None:
    from rightsize.analyzers.serving.calibrate import calibrate
    from rightsize.errors import RightsizeError

    if not values:
        if measured_hf_config is not None:
            raise RightsizeError("--measured-hf-config names the measured model: give"
                                 " --measured too")
        return None
    measured = config
    if measured_hf_config is not None:
        from rightsize.analyzers.sizing.hf_config import from_hf_config
        from rightsize.cli.estimate import read_hf_config
        measured = from_hf_config(read_hf_config(measured_hf_config), measured_hf_config.stem)
    obs: list[Observation] = []
    for v in values:
        obs += _observations(v, measured, precision, catalog, tables, gpu, tp, window)
    return calibrate(obs, measured, catalog=catalog, tables=tables,
                     described=_describe(values, obs), engine=engine)


def _observations(value: str, config: ModelConfig, precision: str, catalog: Catalog,
                  tables: Tables, gpu: str | None, tp: int | None,
                  window: str) -> list[Observation]:
    from rightsize.errors import InputError

    if value.startswith(("http://", "https://")):
        from rightsize.cli.serving_prometheus import prometheus_observations
        return prometheus_observations(value, config, precision, catalog, tables, gpu, tp,
                                       window)
    path = Path(value)
    if not path.is_file():
        raise InputError(path, "no such measured file (a CSV, a trace, or a Prometheus URL)")
    name = path.name.lower()
    if name.endswith((".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")):
        from rightsize.cli.serving_trace import trace_observations
        return trace_observations(path, config, precision, catalog, gpu, tp)
    return read_measured_csv(path, catalog, precision)
