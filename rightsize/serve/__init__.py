"""``rightsize serve``: upload exports over HTTP, get reports, keep history, compare runs.

A front end over the same pipeline as the CLI: uploads are streamed to a content-addressed
store (:mod:`.upload`), indexed in one SQLite file (:mod:`.store`), analyzed by
:func:`rightsize.pipeline.analyze_paths` in a bounded pool of spawned worker processes
(:mod:`.jobs`, :mod:`.worker`) and shown with the report renderer of :mod:`rightsize.reports`.
The ASGI app is :mod:`.app`; it needs the optional ``serve`` extra (Starlette, uvicorn,
python-multipart). Nothing here parses a vendor format.
"""
