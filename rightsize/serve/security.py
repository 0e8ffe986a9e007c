"""Who may talk to the server: the token rule, the Host check and the CSRF rule.

- With a token (always when bound beyond loopback), every request but ``GET /healthz`` carries
  it: ``Authorization: Bearer TOKEN``, or the cookie that ``/?token=TOKEN`` sets (HttpOnly,
  SameSite=Strict) so a browser can follow links.
- Bound to loopback, the ``Host`` header must name loopback: a web page cannot reach the
  server through a DNS name rebound to 127.0.0.1.
- A state-changing request (POST, DELETE) from a browser must be same-origin: its ``Origin``
  (or, lacking one, ``Sec-Fetch-Site``) must not name another site. Clients that send neither
  (curl, scripts) are not browsers and cannot be driven by another site's page.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import Request

from rightsize.serve.config import TOKEN_COOKIE, ServeConfig, is_loopback

_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
OPEN_PATHS = ("/healthz",)


def token_ok(config: ServeConfig, request: Request) -> bool:
    if config.token is None or request.url.path in OPEN_PATHS:
        return True
    offered = request.cookies.get(TOKEN_COOKIE, "")
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        offered = header[7:].strip()
    return hmac.compare_digest(offered.encode(), config.token.encode())


def host_ok(config: ServeConfig, request: Request) -> bool:
    if not is_loopback(config.host):
        return True
    host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    return is_loopback(host.strip("[]"))


def same_origin(request: Request) -> bool:
    if request.method in _SAFE_METHODS:
        return True
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def token_in_query(config: ServeConfig, request: Request) -> bool:
    """``/?token=TOKEN`` itself: the one request that may carry the token in its URL."""
    offered = request.query_params.get("token")
    if config.token is None or request.url.path != "/" or offered is None:
        return False
    return hmac.compare_digest(offered.encode(), config.token.encode())
