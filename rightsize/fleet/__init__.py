"""Fleets of jobs: every job's traces analyzed into one table, and the table into a report.

``discover`` finds the inputs under paths and globs and groups them into jobs (a run directory,
the ranks of one distributed job, one file); ``hashing`` keys each job by the content of its
files; ``analyze`` is the per-job worker (the pipeline's document reduced to one row);
``table`` is the fleet table (a Parquet dataset partitioned by recorded day, written batch by
batch atomically); ``scan`` ties them together on :mod:`rightsize.engine`; ``report`` reduces
the table to the fleet report model. Schema: docs/fleet-table.md (``schema.SCHEMA_VERSION``).
"""
