"""Readers of profiling files into one normalized schema; nothing else parses vendor formats.

The readers, one module each, in the order the loader tries them
(:data:`rightsize.traces.registry.READERS`):

- ``nsys`` -- Nsight Systems SQLite exports (imported for SQLite files only);
- ``ncu`` -- Nsight Compute CSV;
- ``metrics_logs`` -- nvidia-smi ``--query-gpu`` CSV, dcgm-exporter scrapes and dcgmi dmon logs
  (the DCGM formats in ``dcgm_logs``);
- ``kineto`` -- PyTorch Profiler (Kineto) JSON, plain or gzip.

Each implements :class:`rightsize.traces.readers.Reader` (``detect``, ``read``) as its
``READER``; :mod:`rightsize.traces.loader` expands paths (files, per-rank directories, run
directories, whose samples ``samples`` reads) and runs the registry's readers. The normalized
frames are declared in ``schema`` (traces) and ``samples`` (GPU and host samples).

Importing this package imports nothing: callers import the module they need, so that
``rightsize --help`` stays free of polars.
"""
