"""Pure analyzers: the normalized traces in, frozen results out.

Input: the frames the readers in :mod:`rightsize.traces` produce (one normalized trace per rank,
plus GPU and host samples). Output: frozen dataclasses -- :class:`~.analysis.Analysis` and the
typed JSON document built from it (:mod:`.document`). Subpackages: :mod:`.metrics` (the
TensorBoard plugin's and HTA's definitions, steps, kernels, ops), :mod:`.diagnosis` (what bounds
the step), :mod:`.sizing` (memory estimate and projection onto other GPUs), :mod:`.compare` (two
analyses), :mod:`.plan` (serving capacity). Nothing here prints, plots, reads files or changes
its inputs; importing this package imports nothing (callers import the modules they use).
"""
