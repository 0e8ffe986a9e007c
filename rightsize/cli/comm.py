"""``rightsize comm``: the communication model against nccl-tests logs.

``check LOG``: every row of an nccl-tests / rccl-tests log predicted by the model without
fitting on it -- measured and predicted µs per size, the algorithm and protocol NCCL runs it
with (text, or ``--format json``: docs/json-contract.md). ``fit LOG... -o FILE``: the model's
factors refitted on your own logs, a file ``analyze``, ``estimate`` and ``serving`` read with
``--comm-model FILE`` (your measured fabric beats any catalog). ``systems``: the catalog's
systems (GPUs per node, the network per GPU) a ``--system system=NAME`` spec can name. The
fabric comes from the catalog GPU the log's rank lines name; ``--system SPEC`` (grammar:
docs/comm.md), ``--intra`` and ``--inter`` say or override it. Only click is imported at module
level.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rightsize.cli.common import catalog_option, load_catalog_for_cli

if TYPE_CHECKING:
    from rightsize.analyzers.sizing.comm import CommModel
    from rightsize.analyzers.sizing.comm_check import CommCheck
    from rightsize.analyzers.sizing.comm_system import CommSystem
    from rightsize.catalog import Catalog
    from rightsize.traces.nccl_tests import NcclLog

MIB = 1 << 20

comm_model_option = click.option(
    "--comm-model", "comm_model", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="A communication model fitted on your own nccl-tests logs (rightsize comm fit): it "
         "replaces the shipped one.")


def fabric_options(fn: Any) -> Any:
    for option in reversed([
        click.option("--system", "spec", default=None, metavar="SPEC",
                     help="What the ranks ran on: key=value,... (gpu=, system=, "
                          "gpus_per_node=, nodes=, ranks=, arch=, intra=, inter=, "
                          "gpus_per_switch=, cpu=, nccl=; docs/comm.md)."),
        click.option("--intra", default=None, metavar="KIND[:DETAIL]",
                     help="In-node link: nvswitch, nvlink, xgmi, pcie-switch (peer-to-peer "
                          "under PCIe switches), pcie-cpu (each GPU on the CPU's ports) or "
                          "pcie-shm (no peer-to-peer: through host memory), with "
                          "nvlink4x18 / gen4 / GB/s."),
        click.option("--inter", default=None, metavar="KIND:GBPS",
                     help="Network per GPU: ib, roce, efa, slingshot or eth, and its Gb/s."),
        catalog_option,
    ]):
        fn = option(fn)
    return fn


def spec_of(spec: str | None, intra: str | None, inter: str | None) -> str | None:
    parts = [p for p in (spec, f"intra={intra}" if intra else None,
                         f"inter={inter}" if inter else None) if p]
    return ",".join(parts) or None


def load_comm_model(path: Path | None) -> CommModel:
    """The user's model file, else the shipped one."""
    from rightsize.analyzers.sizing import comm

    return comm.read_model(path) if path is not None else comm.load_model()


def _read(path: Path, catalog: Catalog, spec: str | None) -> tuple[NcclLog, CommSystem]:
    from rightsize.analyzers.sizing.comm_check import system_of_log
    from rightsize.traces.nccl_tests import read_log

    log = read_log(path)
    return log, system_of_log(log, catalog, spec)


@click.group()
def comm() -> None:
    """Check the communication model on nccl-tests logs, or fit it on your own."""


@comm.command()
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@fabric_options
@comm_model_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def check(log: Path, spec: str | None, intra: str | None, inter: str | None,
          catalog_path: Path | None, comm_model: Path | None, fmt: str) -> None:
    """Measured vs predicted time per size of every table of an nccl-tests LOG."""
    from rightsize.analyzers.sizing.comm_check import check as run_check

    catalog = load_catalog_for_cli(catalog_path)
    nccl, system = _read(log, catalog, spec_of(spec, intra, inter))
    result = run_check(nccl, system, load_comm_model(comm_model))
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=1))
        return
    click.echo(render(result), nl=False)


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n} B"


def render(result: CommCheck) -> str:
    s = result.system
    net = f", {s.inter} {s.nic_gbps:g} Gb/s per GPU" if s.inter else ""
    head = (f"{s.gpu or 'GPU'}: {s.intra} {s.link_gbs:g} GB/s per direction per GPU{net} "
            f"({s.source}); model: {result.model}")
    lines = [head, ""]
    for t in result.tables:
        lines.append(f"{t.collective}: {t.ranks} ranks on {t.nodes} node"
                     f"{'s' if t.nodes > 1 else ''}")
        lines += [f"  note: {n}" for n in t.notes]
        lines.append(f"  {'size':>10} {'measured µs':>12} {'predicted µs':>13} {'error':>7}  "
                     "algorithm/protocol")
        for r in t.rows:
            lines.append(f"  {_size(r.bytes):>10} {r.measured_us:>12.1f} {r.predicted_us:>13.1f}"
                         f" {r.error_pct:>+6.0f}%  {r.algorithm}/{r.protocol}")
        big, small = t.median_error_pct(MIB), t.median_error_pct(0, MIB)
        parts = [f"{label} {v:.1f}%" for label, v in (("1 MiB and more", big),
                                                      ("under 1 MiB", small)) if v is not None]
        lines += [f"  median |error|: {', '.join(parts)}", ""]
    return "\n".join(lines)


@comm.command()
@click.argument("logs", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@fabric_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the fitted model (JSON).")
@click.option("--force", is_flag=True, help="Overwrite the output file.")
def fit(logs: tuple[Path, ...], spec: str | None, intra: str | None, inter: str | None,
        catalog_path: Path | None, output: Path, force: bool) -> None:
    """Refit the model's factors on your own nccl-tests LOGS (one fabric, or several with
    their rank lines naming the GPU) into a file for --comm-model."""
    from rightsize.analyzers.sizing import comm
    from rightsize.analyzers.sizing.comm_check import fit_model
    from rightsize.cli.output import write_output

    catalog = load_catalog_for_cli(catalog_path)
    items = [_read(p, catalog, spec_of(spec, intra, inter)) for p in logs]
    model = fit_model(items, comm.load_model())
    write_output(json.dumps(model, indent=1) + "\n", output, force, list(logs))
    errors = ", ".join(f"{k} {v:.1f}%" for k, v in model["error_pct"].items())
    click.echo(f"wrote {output}: fitted on {len(logs)} log(s); median |error| on them: "
               f"{errors}")
    click.echo(f"next: rightsize analyze TRACES --comm-model {output}")


@comm.command()
@catalog_option
def systems(catalog_path: Path | None) -> None:
    """The catalog's systems: GPUs per node and the network per GPU (system=NAME)."""
    from rightsize.catalog.links import systems as all_systems

    load_catalog_for_cli(catalog_path)
    for s in all_systems():
        click.echo(f"{s.name}: {s.gpus_per_node} x {s.gpu or 'any card'}; {s.nics} "
                   f"({s.nic_class}, {s.nic_gbps_per_gpu:g} Gb/s per GPU)")
