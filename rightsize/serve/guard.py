"""The connection guard: a deadline on every phase of a request, a connection cap, bounded logs.

Input: a :class:`~rightsize.serve.config.ServeConfig`. Output: uvicorn's h11 protocol with
deadlines (:class:`GuardedH11Protocol`), a uvicorn server that closes what its grace period
left open (:class:`GracefulServer`) and a log handler whose volume an attacker cannot drive
(:class:`RateLimit`).

Phases, each with its deadline (uvicorn alone has only the keep-alive one):

- **head**: the request line and headers must be complete within ``timeout_s`` of the
  connection opening or of the previous response ending (an idle keep-alive connection, a
  header sent one byte at a time); past it, 408 and the connection is closed.
- **body**: every ``timeout_s`` window of the body must bring ``min_upload_bytes_per_s``
  times the window (or the rest of the body); a body that stalls or trickles is cut off, which
  the upload handler sees as a client that went away (its partial file is removed). A window
  in which the server itself paused reading (its buffer full) does not count.
- **response**: each window of a response must be taken by the client at
  ``min_read_bytes_per_s`` (counted as bytes the kernel accepted: written to the socket less
  what waits in the server's buffer) whenever the server has bytes waiting for it; a client
  that reads slower is cut off. A response waits for the client (responses stream from disk,
  :mod:`.documents`), so a slow reader holds one piece of it, never the whole.

A request that carries both ``Content-Length`` and ``Transfer-Encoding`` is answered 400 and
its connection closed before the application sees it (RFC 9112 6.3: the two disagree about
where the body ends, the way request smuggling starts; h11 would take the chunked framing and
keep the connection, running the bytes after the chunked body as a second request).

Beyond ``max_connections`` open connections (kept below the file descriptor limit) a new one
is answered 503 with ``Retry-After`` and closed at once, before it is read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rightsize.serve.config import ServeConfig

log = logging.getLogger("rightsize.serve")

_HEAD, _BODY, _APP = "head", "body", "app"


def _raw_response(status: int, reason: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and the connection cap of this module."""

    serve_config: ServeConfig  # set on the subclass made by :func:`protocol_for`

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _HEAD
        self._timer: asyncio.TimerHandle | None = None
        self._window_bytes = 0
        self._refused = False
        self._sent_mark = 0  # bytes the kernel had taken at the start of the window
        self._written = 0  # bytes handed to the transport on this connection

    # -- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        cfg = self.serve_config
        if len(self.connections) >= cfg.max_connections:
            self._refused = True
            log.warning("refused a connection: %d are open (--max-connections)",
                        len(self.connections))
            transport.write(_raw_response(
                503, "Service Unavailable",
                f"busy: {cfg.max_connections} connections are open; retry later",
                f"retry-after: {cfg.retry_after_s}\r\n"))
            transport.close()
            return
        super().connection_made(transport)
        self.transport = _Counting(transport, self)  # type: ignore[assignment]
        next_event = self.conn.next_event

        def checked_next_event() -> Any:
            event = next_event()
            if isinstance(event, h11.Request) and _both_lengths(event.headers):
                self._close("Content-Length and Transfer-Encoding both", 400, "Bad Request",
                            "a request with both Content-Length and Transfer-Encoding is "
                            "refused (RFC 9112)")
                return h11.NEED_DATA  # the application never sees it
            return event

        self.conn.next_event = checked_next_event  # type: ignore[method-assign]
        self._enter(_HEAD)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self._refused:
            return
        super().connection_lost(exc)
        self._unlink()

    def _unlink(self) -> None:
        """Break the references a closed connection's objects hold to each other (this
        protocol, its h11 state and the bytes it buffered, uvicorn's request cycle, the
        counting transport), so they are freed at once, not by a later full collection:
        2,683 uploads answered 503 unread (issue 40's bombs while the upload slots were
        full) left the server at 343 MiB from 111 MiB; now 9,412 leave it at 118 MiB.
        After ``connection_lost`` nothing uses them: the cycle's sends return, no timer
        is left."""
        self.conn.__dict__.pop("next_event", None)
        if isinstance(self.transport, _Counting):
            self.transport = self.transport._transport  # type: ignore[assignment]
        self.cycle = None  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._phase == _BODY:
            self._window_bytes += len(data)
        before = self.cycle
        super().data_received(data)
        if self.cycle is not before and self.cycle is not None:  # a request head arrived
            self._enter(_BODY)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._enter(_HEAD)  # the next request's head, or the connection idles out

    # -- deadlines -------------------------------------------------------------------------

    def _sent(self) -> int:
        """Bytes of this connection's responses the kernel has taken."""
        return self._written - self.transport.get_write_buffer_size()

    def _enter(self, phase: str) -> None:
        self._phase, self._window_bytes = phase, 0
        self._sent_mark = self._sent() if self.transport is not None else 0
        self._cancel()
        self._timer = self.loop.call_later(self.serve_config.timeout_s, self._deadline)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _deadline(self) -> None:
        self._timer = None
        if self.transport is None or self.transport.is_closing():
            return
        cfg = self.serve_config
        if self._phase == _HEAD:
            if self.cycle is None or self.cycle.response_complete:
                self._close("no complete request head", 408, "Request Timeout",
                            f"no complete request within {cfg.timeout_s:g} s")
                return
        elif self._phase == _BODY and self.cycle is not None:
            if not self.cycle.more_body:  # the whole body is in: the app's turn
                self._enter(_APP)
                return
            floor = cfg.min_upload_bytes_per_s * cfg.timeout_s
            if not self.flow.read_paused and self._window_bytes < floor:
                self._close(f"request body stalled: {self._window_bytes} bytes in "
                            f"{cfg.timeout_s:g} s")
                return
        elif self._phase == _APP and self.cycle is not None and not self.cycle.response_complete:
            floor = cfg.min_read_bytes_per_s * cfg.timeout_s
            taken = self._sent() - self._sent_mark
            if self.transport.get_write_buffer_size() and taken < floor:
                self._close(f"the client read {taken} bytes of the response in "
                            f"{cfg.timeout_s:g} s")
                return
        phase = self._phase
        self._enter(phase)

    def _close(self, why: str, status: int | None = None, reason: str = "",
               message: str = "") -> None:
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("closed the connection of %s: %s", client, why)
        if status is None:  # cut: what is buffered for a client that does not read is dropped
            self.transport.abort()
            return
        self.transport.write(_raw_response(status, reason, message))
        self.transport.close()


def _both_lengths(headers: Any) -> bool:
    names = {name.lower() for name, _ in headers}
    return b"content-length" in names and b"transfer-encoding" in names


class _Counting:
    """The connection's transport, counting the bytes written to it (the read-rate deadline
    compares them with what is still buffered)."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._transport, self._protocol = transport, protocol

    def write(self, data: bytes) -> None:
        self._protocol._written += len(data)
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def protocol_for(config: ServeConfig) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, bound to ``config``."""
    return type("ServeH11Protocol", (GuardedH11Protocol,), {"serve_config": config})


class GracefulServer(uvicorn.Server):
    """SIGTERM: stop accepting, give open requests the grace period, then close what is left.

    uvicorn cancels the requests' tasks when ``timeout_graceful_shutdown`` runs out but leaves
    their connections open; they are closed here so the process exits.
    """

    async def shutdown(self, sockets: Any = None) -> None:
        await super().shutdown(sockets)
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None and not transport.is_closing():
                transport.abort()


class RateLimit(logging.Filter):
    """At most ``burst`` records per ``window_s`` for each (logger, message template); then one
    line saying how many were suppressed. An attack repeats a few templates (a refused
    connection, an accept() failure): the log grows by a bounded amount per minute."""

    def __init__(self, burst: int = 10, window_s: float = 60.0) -> None:
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self._seen: dict[tuple[str, str], list[float]] = {}  # key -> [window start, count]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        start, count = self._seen.get(key, (now, 0))
        if now - start >= self.window_s:
            if count > self.burst:
                record.msg = f"{count - self.burst} similar messages suppressed; then: " \
                             f"{record.msg}"
            start, count = now, 0
        count += 1
        if len(self._seen) > 1000:  # templates are few; never let the table grow either
            self._seen.clear()
        self._seen[key] = [start, count]
        if count > self.burst:
            return False
        if count == self.burst:
            record.msg = f"{record.msg} (further ones suppressed for {self.window_s:g} s)"
        return True


def configure_logging() -> logging.Handler:
    """One stderr handler, rate limited, for the server, uvicorn and asyncio (whose accept()
    failures would otherwise print one traceback each). Records are written by a thread of
    their own (a queue between): a write to a slow log file never holds the event loop."""
    import atexit
    import queue
    from logging.handlers import QueueHandler, QueueListener

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = QueueListener(records, handler)
    listener.start()
    atexit.register(listener.stop)
    front = QueueHandler(records)
    front.addFilter(RateLimit())
    root = logging.getLogger()
    root.handlers[:] = [front]
    root.setLevel(logging.WARNING)
    logging.getLogger("rightsize.serve").setLevel(logging.INFO)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    return handler


def run(app: Any, config: ServeConfig) -> None:
    """Serve ``app`` until SIGTERM/SIGINT, with the guard and the grace period (logging is
    configured before the app is made: :func:`configure_logging`)."""
    proxied = bool(config.forwarded_allow_ips)
    server = GracefulServer(uvicorn.Config(
        app, host=config.host, port=config.port, log_config=None, access_log=False,
        server_header=False, http=protocol_for(config), timeout_keep_alive=max(1, round(config.timeout_s)),
        timeout_graceful_shutdown=max(1, round(config.grace_s)), backlog=config.backlog,
        proxy_headers=proxied, forwarded_allow_ips=config.forwarded_allow_ips or None,
        lifespan="on"))
    server.run()
