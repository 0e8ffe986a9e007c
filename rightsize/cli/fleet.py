"""``rightsize fleet``: many jobs at once. Its subcommands live in their own modules and are
listed once importable: ``scan`` and ``report`` (traces and run directories into a fleet table,
and the table into a report), ``metrics`` (workloads right-sized from cluster metrics)."""

from __future__ import annotations

import click

# subcommand -> "module:attribute", imported on first use (as the top-level commands are)
FLEET_COMMANDS: dict[str, str] = {
    "scan": "rightsize.cli.fleet_scan:scan",
    "report": "rightsize.cli.fleet_report:report",
    "metrics": "rightsize.cli.fleet_metrics:metrics",
}


class _FleetGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        from rightsize.cli import _importable
        return [n for n in FLEET_COMMANDS if _importable(FLEET_COMMANDS[n])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        import importlib

        from rightsize.cli import _importable
        target = FLEET_COMMANDS.get(cmd_name)
        if target is None or not _importable(target):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_FleetGroup)
def fleet() -> None:
    """Right-size many jobs at once: a fleet table of every job's analysis, its report, and
    workloads right-sized from cluster metrics."""
