"""``rightsize serving``: served-model latency and capacity. Its subcommands live in their own
modules and are listed once importable: ``predict`` (TTFT and TPOT of a static batch on a
deployment, ``serving_predict``), ``simulate`` and ``plan`` (an online load through the
continuous-batching simulation, and the cheapest plan that meets TTFT/TPOT SLOs)."""

from __future__ import annotations

import click

# subcommand -> "module:attribute", imported on first use (as the top-level commands are)
SERVING_COMMANDS: dict[str, str] = {
    "predict": "rightsize.cli.serving_predict:predict",
    "simulate": "rightsize.cli.serving_simulate:simulate",
    "plan": "rightsize.cli.serving_plan:plan",
}


class _ServingGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        from rightsize.cli import _importable
        return [n for n in SERVING_COMMANDS if _importable(SERVING_COMMANDS[n])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        import importlib

        from rightsize.cli import _importable
        target = SERVING_COMMANDS.get(cmd_name)
        if target is None or not _importable(target):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_ServingGroup)
def serving() -> None:
    """Serve a model at a latency target: prefill/decode time on any GPU, TP and batch
    (predict), calibrated on your own measured points."""
