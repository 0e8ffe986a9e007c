"""Errors that reach the user as one line.

Library code raises these and never calls ``sys.exit``; the CLI's single error boundary
(``rightsize.cli``) prints ``rightsize: error: <message>`` and exits with status 1.
"""

from __future__ import annotations


class RightsizeError(Exception):
    """Base class: a problem the user can act on, worded as one line."""


class InputError(RightsizeError):
    """An input file or directory cannot be read as any supported format."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class RunDirError(RightsizeError):
    """A run directory is missing, incomplete, or written by a newer rightsize."""


class OutputExistsError(RightsizeError):
    """Refusing to overwrite something the user already has."""

    def __init__(self, path: object) -> None:
        super().__init__(f"{path} already exists; pass --force to overwrite it")
