"""``rightsize serve``: the upload-and-report server (needs the ``serve`` extra)."""

from __future__ import annotations

from pathlib import Path

import click

from rightsize.errors import RightsizeError

EXTRA_HINT = "rightsize serve needs its extra: pip install 'rightsize[serve]'"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback requires a token.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("rightsize-data"), show_default=True,
              help="Uploads, the run index (runs.sqlite) and each run's analysis and report.")
@click.option("--max-upload-mb", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Cap per file, on the bytes received and on what a gzip file expands to.")
@click.option("--workers", type=click.IntRange(min=1, max=64), default=2, show_default=True,
              help="Analysis processes running at once.")
@click.option("--worker-memory-mb", type=click.IntRange(min=0), default=None,
              help="Address-space limit of each analysis process (default: this machine's "
                   "memory divided by --workers; 0: no limit).")
@click.option("--max-concurrent-uploads", type=click.IntRange(min=1), default=16,
              show_default=True, help="Beyond this, uploads get 503 with Retry-After.")
@click.option("--max-queued", type=click.IntRange(min=1), default=64, show_default=True,
              help="Queued plus running analyses; beyond this, uploads get 503.")
@click.option("--token", default=None, envvar="RIGHTSIZE_SERVE_TOKEN",
              help="Required on every request (generated when binding beyond loopback).")
def serve(host: str, port: int, data_dir: Path, max_upload_mb: int, workers: int,
          worker_memory_mb: int | None, max_concurrent_uploads: int, max_queued: int,
          token: str | None) -> None:
    """Serve uploads and reports over HTTP: drop a trace, get the verdict and a link.

    \b
    Examples:
      rightsize serve
      rightsize serve --data-dir /srv/rightsize --workers 4
      rightsize serve --host 0.0.0.0 --token "$TOKEN"
    """
    try:
        import uvicorn

        from rightsize.serve.app import create_app
    except ImportError as exc:
        raise RightsizeError(f"{EXTRA_HINT} ({exc.name} is missing)") from None
    from rightsize.serve.config import MIB, ServeConfig, resolve_token

    token, generated = resolve_token(host, token)
    if worker_memory_mb is not None and 0 < worker_memory_mb < 256:
        raise click.UsageError("--worker-memory-mb below 256 leaves no room to start Python")
    if worker_memory_mb is None:
        import psutil

        worker_memory_mb = psutil.virtual_memory().total // MIB // workers
    config = ServeConfig(data_dir=data_dir.resolve(), host=host, port=port, token=token,
                         max_upload_bytes=max_upload_mb * MIB, workers=workers,
                         worker_memory_bytes=worker_memory_mb * MIB if worker_memory_mb else None,
                         max_concurrent_uploads=max_concurrent_uploads,
                         max_queued_runs=max_queued)
    try:
        app = create_app(config)
    except OSError as exc:
        raise RightsizeError(f"cannot use the data directory {data_dir}: {exc}") from None
    _check_port(host, port)
    _announce(config, generated)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                server_header=False)


def _check_port(host: str, port: int) -> None:
    """Say in one line when the address is taken, instead of uvicorn's log after start-up."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as exc:
        raise RightsizeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _announce(config: object, generated: bool) -> None:
    from rightsize.serve.config import ServeConfig

    assert isinstance(config, ServeConfig)
    click.echo(f"rightsize serve: {config.url}  (data in {config.data_dir})")
    auth = ""
    if config.token:
        if generated:
            click.echo(f"token (generated): {config.token}")
        click.echo(f"open {config.url}/?token={config.token} in a browser")
        auth = f' -H "Authorization: Bearer {config.token}"'
    click.echo(f"next: curl{auth} -F file=@trace.json.gz {config.url}/api/runs")
