"""Team and project labels of jobs, from a ``--labels`` file of path patterns.

The file is CSV with a header ``pattern,team,project`` (either label may be empty). A job takes
the labels of the first pattern that matches its path (``fnmatch``, case-sensitive, matched
against the absolute path, where ``*`` also crosses ``/``: ``*/vision/*`` matches any path with
a ``vision`` folder). A run directory with no match takes the ``labels`` object of its manifest
(``{"team": ..., "project": ...}``) when it has one, else its command's name as the project.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from rightsize.errors import RightsizeError

HEADER = ("pattern", "team", "project")


class LabelsError(RightsizeError):
    """A labels file that cannot be read."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: str
    team: str | None
    project: str | None


@dataclass(frozen=True, slots=True)
class Labels:
    team: str | None
    project: str | None
    source: str | None  # labels-file | manifest | command | None


NONE = Labels(None, None, None)


def read_rules(path: Path) -> tuple[Rule, ...]:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path}: cannot read the labels file ({exc})") from None
    return parse_rules(text, str(path))


def parse_rules(text: str, where: str = "labels") -> tuple[Rule, ...]:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = next(reader, None)
    if header is None or tuple(h.strip().lower() for h in header) != HEADER:
        raise LabelsError(f"{where}: the first line must be the header "
                          f"{','.join(HEADER)} (got {','.join(header or [])!r})")
    rules = []
    for n, row in enumerate(reader, 2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3 or not row[0].strip():
            raise LabelsError(f"{where}, line {n}: expected pattern,team,project "
                              f"with a pattern (got {len(row)} fields)")
        pattern, team, project = (c.strip() for c in row)
        rules.append(Rule(pattern, team or None, project or None))
    return tuple(rules)


def match(path: str, rules: tuple[Rule, ...]) -> Labels | None:
    for r in rules:
        if fnmatchcase(path, r.pattern):
            return Labels(r.team, r.project, "labels-file")
    return None


def from_manifest(manifest: dict[str, Any]) -> Labels:
    labels = manifest.get("labels")
    if isinstance(labels, dict):
        team, project = labels.get("team"), labels.get("project")
        if isinstance(team, str) or isinstance(project, str):
            return Labels(team if isinstance(team, str) else None,
                          project if isinstance(project, str) else None, "manifest")
    command = manifest.get("command")
    name = command.get("name") if isinstance(command, dict) else None
    return Labels(None, name, "command") if isinstance(name, str) and name else NONE
