"""Jobs across ranks: every rank of a distributed job analyzed as one.

``collectives`` extracts one rank's collective calls, ``summary`` makes a rank's compact
summary (per-step and per-call rows, never raw events: what a worker hands the reduce),
``matching``/``stragglers``/``job`` reduce the summaries of all ranks to the document's ``job``
section, ``fabric`` names what joins the ranks and ``advice`` turns stragglers into rules.
"""
