"""Who may talk to the server: the token rule, the Host check and the CSRF rule.

- With a token (always when bound beyond loopback), every request but ``GET /healthz`` carries
  it: ``Authorization: Bearer TOKEN``, or the cookie that ``/?token=TOKEN`` sets (HttpOnly,
  SameSite=Lax, so that links out of a sandboxed report, whose origin is opaque,
  carry it too; POST and DELETE are guarded by the CSRF rule below) so a browser can follow
  links.
- Bound to loopback, the ``Host`` header must name loopback: a web page cannot reach the
  server through a DNS name rebound to 127.0.0.1.
- A state-changing request (POST, DELETE) from a browser must be same-origin: its ``Origin``
  (or, lacking one, ``Sec-Fetch-Site``) must not name another site. Clients that send neither
  (curl, scripts) are not browsers and cannot be driven by another site's page.
- Behind a reverse proxy (``--public-url``), the public URL's host is accepted beside loopback
  names and its origin is the server's own for the CSRF rule; ``--forwarded-allow-ips`` makes
  uvicorn believe the proxy's ``X-Forwarded-Proto``/``-For`` (and nobody else's).
- Every answer says ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and,
  unless the route set its own, ``Cache-Control: no-store`` (pages behind a token stay out of
  shared caches and the back/forward cache).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import Request

from rightsize.serve.config import TOKEN_COOKIE, ServeConfig, is_loopback

_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
OPEN_PATHS = ("/healthz",)
RESPONSE_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


def _public(config: ServeConfig) -> tuple[str, str] | None:
    """(scheme, host[:port]) of ``--public-url``, or None."""
    if not config.public_url:
        return None
    parts = urlsplit(config.public_url)
    return parts.scheme, parts.netloc


def public_scheme(config: ServeConfig, request: Request) -> str:
    public = _public(config)
    return public[0] if public else request.url.scheme


def base_url(config: ServeConfig, request: Request) -> str:
    """The URL clients reach this server at: ``--public-url``, else what the request used."""
    if config.public_url:
        return config.public_url.rstrip("/")
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def host_refusal(config: ServeConfig) -> str:
    if config.public_url:
        return f"this server answers to {_public(config)[1]} and loopback host names only"  # type: ignore[index]
    return "this server answers to loopback host names only"


def token_ok(config: ServeConfig, request: Request) -> bool:
    if config.token is None or request.url.path in OPEN_PATHS:
        return True
    offered = request.cookies.get(TOKEN_COOKIE, "")
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        offered = header[7:].strip()
    return hmac.compare_digest(offered.encode(), config.token.encode())


def host_ok(config: ServeConfig, request: Request) -> bool:
    header = request.headers.get("host", "")
    public = _public(config)
    if public is not None and header.lower() == public[1].lower():
        return True
    if not is_loopback(config.host):
        return True
    host = urlsplit(f"//{header}").hostname or ""
    return is_loopback(host.strip("[]"))


def same_origin(config: ServeConfig, request: Request) -> bool:
    if request.method in _SAFE_METHODS:
        return True
    origin = request.headers.get("origin")
    if origin is not None:
        own = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
        if config.public_url:
            own.add(config.public_url.rstrip("/"))
        return origin in own
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def token_in_query(config: ServeConfig, request: Request) -> bool:
    """``/?token=TOKEN`` itself: the one request that may carry the token in its URL."""
    offered = request.query_params.get("token")
    if config.token is None or request.url.path != "/" or offered is None:
        return False
    return hmac.compare_digest(offered.encode(), config.token.encode())
