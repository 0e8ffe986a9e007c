"""Proxy mode behind a real nginx on loopback, terminating TLS (issue 29, 10).

Before: bound to loopback, the server answered 421 to the proxy's public Host and 403 to a
browser's POST (its Origin the public one). With ``--public-url`` and
``--forwarded-allow-ips`` it serves through the proxy with the token cookie marked Secure and
every check still in force. The nginx configuration is the one docs/serve.md gives. Skips
without Debian's nginx or openssl (CI installs nginx: see ./dev).
"""

from __future__ import annotations

import json
import shutil
import signal
import ssl
import subprocess
from collections.abc import Iterator
from http.client import HTTPSConnection
from pathlib import Path

import pytest

from tests.serve.serving import Reply, Server, free_port, multipart

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
TOKEN = "Zq8-xY2_pL5vR9tW-proxy"
PUBLIC_HOST = "rightsize.test"

pytestmark = pytest.mark.skipif(NGINX is None or shutil.which("openssl") is None,
                                reason="needs nginx and openssl (apt-get install nginx)")

# The location block documented in docs/serve.md ("Behind a reverse proxy").
LOCATION = """
        location / {
            proxy_pass http://127.0.0.1:%(upstream)d;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_request_buffering off;
            client_max_body_size 2g;
            proxy_read_timeout 300s;
        }
"""


def _nginx_conf(work: Path, port: int, upstream: int) -> str:
    temp = "".join(f"    {kind}_temp_path {work}/{kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\nworker_processes 1;\npid {work}/nginx.pid;\n"
            f"error_log {work}/error.log warn;\nevents {{ worker_connections 64; }}\n"
            f"http {{\n    access_log off;\n{temp}"
            f"    server {{\n        listen 127.0.0.1:{port} ssl;\n"
            f"        server_name {PUBLIC_HOST};\n"
            f"        ssl_certificate {work}/cert.pem;\n"
            f"        ssl_certificate_key {work}/key.pem;\n"
            + LOCATION % {"upstream": upstream} + "    }\n}\n")


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[Server, int]]:
    work = tmp_path / "nginx"
    work.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={PUBLIC_HOST}", "-keyout", str(work / "key.pem"),
                    "-out", str(work / "cert.pem")], check=True, capture_output=True,
                   timeout=60)
    port = free_port()
    server = Server(tmp_path / "data", ("--token", TOKEN, "--public-url",
                                        f"https://{PUBLIC_HOST}:{port}",
                                        "--forwarded-allow-ips", "127.0.0.1")).start()
    (work / "nginx.conf").write_text(_nginx_conf(work, port, server.port))
    assert NGINX is not None
    nginx = subprocess.Popen([NGINX, "-c", str(work / "nginx.conf"), "-p", str(work)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        server.wait_for(lambda: _get(port, "/healthz").status == 200 or None, 15,
                        why="nginx up")
        yield server, port
    finally:
        nginx.send_signal(signal.SIGQUIT)  # nginx's graceful stop
        try:
            nginx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait(timeout=10)
        server.stop()


def _request(port: int, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> Reply:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a self-signed certificate made for the test
    conn = HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    try:
        conn.request(method, path, body=body,
                     headers={"Host": f"{PUBLIC_HOST}:{port}", **(headers or {})})
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def _get(port: int, path: str) -> Reply:
    try:
        return _request(port, "GET", path)
    except OSError:
        return Reply(0, {}, b"")


def test_behind_nginx_with_tls(proxied: tuple[Server, int]) -> None:
    server, port = proxied
    origin = f"https://{PUBLIC_HOST}:{port}"
    login = _request(port, "GET", f"/?token={TOKEN}")
    assert login.status == 303
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"rightsize_token={TOKEN};") and "Secure" in cookie
    session = {"Cookie": f"rightsize_token={TOKEN}"}
    page = _request(port, "GET", "/", headers=session)
    assert page.status == 200 and f"curl -F file=@trace.json.gz {origin}/api/runs" in page.text

    body, content_type = multipart((("t.json", b'{"traceEvents": []}'),))
    browser = {**session, "Content-Type": content_type, "Origin": origin,
               "Sec-Fetch-Site": "same-origin"}
    created = _request(port, "POST", "/api/runs", body, browser)
    assert created.status == 201, created.body  # was 403 (Origin) or 421 (Host)
    run_id = json.loads(created.body)["id"]

    evil = _request(port, "POST", "/api/runs", body, {**browser, "Origin": "https://evil.test"})
    assert (evil.status, json.loads(evil.body)) == (403, {"error": "cross-site request refused"})
    rebound = _request(port, "GET", "/api/runs", headers={**session, "Host": "evil.test"})
    assert rebound.status == 421
    assert _request(port, "GET", "/api/runs").status == 401  # the token still rules
    assert _request(port, "GET", f"/api/runs/{run_id}", headers=session).status == 200
    # the server itself, bypassing the proxy, still answers loopback names only
    assert server.request("GET", "/api/runs", headers={"Host": "evil.test",
                                                       "Authorization": f"Bearer {TOKEN}"}
                          ).status == 421
