"""``rightsize plan``: serving capacity and cluster sizing from a measured run.

Reads an analysis (traces, a run directory, Nsight exports, or a saved analysis JSON), what the
user knows (``--samples-per-step``/``--tokens-per-step``, ``--latency-slo-ms``, ``--demand``,
``--headroom``, and for LLM serving ``--hf-config``), builds the plan
(:mod:`rightsize.analyzers.plan`), prints it (text or JSON, docs/plan.md) and writes the
Kubernetes manifests to ``--manifests DIR`` (never over existing files without ``--force``).
Only click is imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli

if TYPE_CHECKING:
    from rightsize.analyzers.document import Document
    from rightsize.analyzers.plan.demand import Demand
    from rightsize.analyzers.plan.plan import Plan
    from rightsize.analyzers.plan.serving import KvBudget
    from rightsize.analyzers.plan.workload import HostUsage
    from rightsize.analyzers.sizing.model_shape import ModelShape
    from rightsize.reports.plan_manifests import Manifest

PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
DEFAULT_QUERY = 'sum(rate(http_requests_total{{app="{name}"}}[2m]))'


def _is_document(path: Path) -> bool:
    """A saved analysis: a ``.json`` file whose first key is ``schema_version``."""
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(256).decode("utf-8", "replace")
    except OSError:
        return False
    return '"schema_version"' in head.split(",")[0]


def load_document(paths: tuple[Path, ...]) -> Document:
    from rightsize.analyzers.document import Document

    if len(paths) == 1 and _is_document(paths[0]):
        return Document.from_json(paths[0])
    from rightsize.api import analyze

    return analyze(*paths).document


def host_usage(paths: tuple[Path, ...]) -> HostUsage | None:
    """Peak job CPU and RSS from a run directory's host samples (None without them)."""
    from rightsize.analyzers.plan.workload import HostUsage

    dirs = [p for p in paths if (p / "samples").is_dir()]
    if len(dirs) != 1:
        return None
    import polars as pl

    from rightsize.traces.samples import read_kind

    host = read_kind(dirs[0], "host").drop_nulls(["job_cpu_util_pct", "job_rss_bytes"])
    if host.is_empty():
        return None
    cpu = host.get_column("job_cpu_util_pct")
    return HostUsage(round(float(cpu.max()) / 100, 3),  # type: ignore[arg-type]
                     round(float(cpu.mean()) / 100, 3),  # type: ignore[arg-type]
                     int(host.select(pl.col("job_rss_bytes").max()).item()), host.height)


def read_demand(value: str) -> Demand:
    from rightsize.analyzers.plan import demand
    from rightsize.errors import InputError

    try:
        return demand.constant(float(value))
    except ValueError:
        pass
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"--demand: not a number, and cannot read it as a CSV "
                               f"({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(path, "--demand: the CSV is not UTF-8 text") from None
    return demand.from_csv(text, path.name)


def kv_budget(hf_config: Path, seq: int, precision: str) -> tuple[KvBudget, ModelShape]:
    from rightsize.analyzers.plan.serving import kv_budget as budget
    from rightsize.analyzers.sizing.hf_config import from_hf_config
    from rightsize.cli.estimate import read_hf_config
    from rightsize.vocab import Precision

    shape = from_hf_config(read_hf_config(hf_config), hf_config.stem)
    return budget(shape, Precision(precision), seq), shape


K8S_VERSION = "1.30.0"  # the Kubernetes API the optional OpenAPI check validates against


def openapi_check(items: tuple[Any, ...]) -> str:
    """Validate core-API manifests against the Kubernetes OpenAPI schemas when the optional
    ``kubernetes-validate`` package is installed; say what was checked either way."""
    from rightsize.errors import RightsizeError
    from rightsize.reports.yaml_emit import plain

    try:
        import kubernetes_validate  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return ("checked structurally (pip install kubernetes-validate to check them against "
                "the Kubernetes OpenAPI schemas)")
    core = [m for m in items if not plain(m.obj)["apiVersion"].startswith("keda.sh/")]
    for m in core:
        try:
            kubernetes_validate.validate(plain(m.obj), K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise RightsizeError(f"{m.filename}: fails the Kubernetes {K8S_VERSION} OpenAPI "
                                 f"schema: {exc.message}") from None
    return (f"{', '.join(m.filename for m in core)} validated against the Kubernetes "
            f"{K8S_VERSION} OpenAPI schemas (kubernetes-validate); the KEDA ScaledObject "
            "(a CRD) checked structurally")


def write_manifests(plan: Plan, directory: Path, force: bool, name: str, image: str,
                    query: str | None, server: str,
                    inputs: tuple[Path, ...] = ()) -> tuple[list[Path], str]:
    from rightsize.errors import RightsizeError
    from rightsize.reports.plan_manifests import check_name, manifests

    if (bad := check_name(name)) is not None:
        raise RightsizeError(f"--name: {bad}")
    items = manifests(plan, name, image, query or DEFAULT_QUERY.format(name=name), server)
    if not items:
        return [], ""
    return check_and_write(items, directory, force, inputs)


def check_and_write(items: tuple[Manifest, ...], directory: Path, force: bool,
                    inputs: tuple[Path, ...]) -> tuple[list[Path], str]:
    """Check the manifests (structurally, then against the OpenAPI schemas when available) and
    write each into ``directory``; returns the paths written and what was checked. Shared by
    ``rightsize plan`` and ``rightsize serving plan``."""
    from rightsize import outputs
    from rightsize.errors import RightsizeError
    from rightsize.reports.plan_manifests import check

    problems = [p for m in items for p in check(m)]
    if problems:
        raise RightsizeError("manifest check failed: " + "; ".join(problems))
    checked = openapi_check(items)
    if directory.exists() and not directory.is_dir():
        raise RightsizeError(f"--manifests {directory}: exists and is not a directory")
    # every target checked before any is written: never an input, never over a file unless force
    targets = [outputs.check_target(directory / m.filename, inputs, force) for m in items]
    directory.mkdir(parents=True, exist_ok=True)
    for m, t in zip(items, targets, strict=True):
        outputs.write_text(t, m.text)
    return [directory / m.filename for m in items], checked


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--samples-per-step", type=click.IntRange(min=1), default=None,
              help="Work units (samples, requests) each step serves.")
@click.option("--tokens-per-step", type=click.IntRange(min=1), default=None,
              help="Or tokens each step serves (then --demand is in tokens/s).")
@click.option("--latency-slo-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Latency objective per step (one request's latency, or one decode step).")
@click.option("--demand", required=True, metavar="RATE|CSV",
              help="Demand per second (samples or tokens), or a CSV of time,rate rows "
                   "(seconds or HH:MM).")
@click.option("--headroom", type=click.FloatRange(min=0, max=0.9), default=0.2,
              show_default=True, help="Share of each replica's throughput (and memory) kept free.")
@click.option("--hf-config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="LLM serving: the model's config.json; the KV cache per request bounds "
                   "the concurrent batch per GPU.")
@click.option("--seq", type=click.IntRange(min=1), default=2048, show_default=True,
              help="With --hf-config: tokens per request (prompt plus generated).")
@click.option("--precision", type=click.Choice(PRECISIONS),
              default=None, help="With --hf-config: serving precision (default: the analysis' "
                                 "workload precision, else bf16).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the plan here instead of stdout.")
@click.option("--manifests", "manifests_dir", type=click.Path(path_type=Path),
              default=None,
              help="Directory for the Kubernetes manifests (default: ./rightsize-plan, or "
                   "rightsize-plan-2, -3... when an earlier plan is there).")
@click.option("--no-manifests", is_flag=True, help="Do not write manifests.")
@click.option("--force", is_flag=True, help="Overwrite --output and existing manifests.")
@click.option("--name", default="rightsize-serving", show_default=True,
              help="Deployment / HPA / ScaledObject name.")
@click.option("--image", default="REPLACE-WITH-YOUR-IMAGE", show_default=True,
              help="Container image in the Deployment.")
@click.option("--keda-query", default=None,
              help="Prometheus query of the demand rate for KEDA (default: http_requests_total"
                   " rate of the app).")
@click.option("--prometheus", default="http://prometheus-server.monitoring.svc:9090",
              show_default=True, help="Prometheus address for KEDA.")
@catalog_option
@click.option("-q", "--quiet", is_flag=True, help="No messages on stderr.")
def plan(paths: tuple[Path, ...], samples_per_step: int | None, tokens_per_step: int | None,
         latency_slo_ms: float | None, demand: str, headroom: float, hf_config: Path | None,
         seq: int, precision: str | None, fmt: str, output: Path | None,
         manifests_dir: Path | None,
         no_manifests: bool, force: bool, name: str, image: str, keda_query: str | None,
         prometheus: str, catalog_path: Path | None, quiet: bool) -> None:
    """Replicas, cost and autoscaling for serving a measured job at an SLO and a demand."""
    from rightsize.analyzers.plan import plan as planning
    from rightsize.analyzers.plan.workload import from_document
    from rightsize.cli.output import write_output
    from rightsize.errors import RightsizeError
    from rightsize.reports.plan_text import PlanRenderer
    from rightsize.reports.renderer import Style, render_as

    if (samples_per_step is None) == (tokens_per_step is None):
        raise RightsizeError("give one of --samples-per-step or --tokens-per-step")
    curve = read_demand(demand)
    catalog = load_catalog_for_cli(catalog_path)
    doc = load_document(paths)
    workload = from_document(doc, host_usage(paths))
    kv = shape = None
    if hf_config is not None:
        measured = doc.precision.workload if doc.precision else None
        # tf32 math keeps fp32 weights and KV cache; anything unrecognised: bf16, the default
        measured = "fp32" if measured == "tf32" else measured
        prec = precision or (measured if measured in PRECISIONS else "bf16")
        kv, shape = kv_budget(hf_config, seq, prec)
    inputs = planning.PlanInputs(samples_per_step or tokens_per_step or 1,
                                 "samples" if samples_per_step else "tokens", latency_slo_ms,
                                 curve, headroom, kv, shape)
    result = planning.build(doc, workload, inputs, catalog)
    written, checked = ([], "") if no_manifests else write_manifests(
        result, manifests_dir or fresh_dir(Path("rightsize-plan")), force, name, image,
        keda_query, prometheus, paths)
    page = PlanRenderer(tuple(str(p) for p in written), checked or None,
                        _next(result, written, paths), no_manifests)
    text = render_as(page, result, fmt, Style())
    write_output(text, output, force, paths)
    if not quiet and output is not None:
        click.echo(f"wrote {output}", err=True)


def fresh_dir(base: Path) -> Path:
    """``base`` when it holds nothing yet, else the first of ``base-2``, ``base-3``... that
    does not exist: a second plan never stops on the first one's manifests."""
    if not base.exists() or (base.is_dir() and not any(base.iterdir())):
        return base
    n = 2
    while base.with_name(f"{base.name}-{n}").exists():
        n += 1
    return base.with_name(f"{base.name}-{n}")


def _next(result: Plan, written: list[Path], paths: tuple[Path, ...]) -> str:
    if written:
        files = " ".join(f"-f {p}" for p in written if p.name != "keda-scaledobject.yaml")
        return f"kubectl apply --dry-run=server {files}"
    if result.recommended is None:
        return f"rightsize plan {' '.join(map(str, paths))} with a looser --latency-slo-ms"
    return f"rightsize report {' '.join(map(str, paths))}"
