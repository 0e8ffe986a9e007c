"""The real CLI: one-line errors, the output formats, patches validated against the
Kubernetes schemas, the bearer token, the saved-JSON and log readers."""

from __future__ import annotations

import csv
import io
import json
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from rightsize.traces.prom_json import _slow, parse_range
from tests.conftest import cli
from tests.fleet_metrics.gen import STEP_S, T0, scenarios, short
from tests.fleet_metrics.gen import response as _response
from tests.fleet_metrics.promserver import free_port


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("saved") / "dcgm.json"
    p.write_bytes(_response(scenarios() + short()))
    return p


@pytest.mark.parametrize(("args", "message"), [
    ((), "give one of --prometheus URL or --from FILE"),
    (("--from", "x.json", "--prometheus", "http://127.0.0.1:1"),
     "give one of --prometheus URL or --from FILE"),
    (("--prometheus", "ftp://x"), "--prometheus: 'ftp://x' is not an http(s) URL"),
    (("--prometheus", "http://127.0.0.1:9", "--since", "7 days"),
     "--since: '7 days' is not a duration (30s, 6h, 7d, 1h30m)"),
    (("--from", "nope.json"), "nope.json: no such file or directory"),
    (("--from", "x.json", "--gpu", "H900"), None),
    (("--from", "x.json", "--save", "y.json"), "--save needs --prometheus"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...],
                               message: str | None) -> None:
    (tmp_path / "x.json").write_text('{"status":"success","data":{"resultType":"matrix",'
                                     '"result":[]}}')
    out = cli("fleet", "metrics", *args, cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("rightsize: error: ")
    if message is not None:
        assert out.stderr == f"rightsize: error: {message}\n"


def test_unreachable_prometheus_is_one_line() -> None:
    port = free_port()  # nothing listens there
    out = cli("fleet", "metrics", "--prometheus", f"http://127.0.0.1:{port}", "--since", "1h")
    assert out.returncode == 1
    assert out.stderr.startswith(f"rightsize: error: cannot reach Prometheus at "
                                 f"http://127.0.0.1:{port}: ")


def test_bearer_token_from_the_environment() -> None:
    """Header check only (a stub that records it; the Prometheus tests use the real one)."""
    seen: list[str | None] = []
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("Authorization"))
            code = 200 if self.headers.get("Authorization") == "Bearer s3cret" else 401
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode() if code == 200 else b'{"status":"error",'
                             b'"errorType":"unauthorized","error":"no token"}')

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ok = cli("fleet", "metrics", "--prometheus", url, "--since", "1h", "--step", "60s",
                 env={"RIGHTSIZE_PROMETHEUS_TOKEN": "s3cret"})
        assert ok.returncode == 0, ok.stderr
        # per metric a rate probe and a raw page; then the serving rows' one probe for
        # vLLM/SGLang histograms (nothing more when none answers)
        assert set(seen) == {"Bearer s3cret"} and len(seen) == 2 * 7 + 1
        bad = cli("fleet", "metrics", "--prometheus", url, "--since", "1h",
                  env={"RIGHTSIZE_PROMETHEUS_TOKEN": ""})
        assert bad.returncode == 1
        assert bad.stderr == (f"rightsize: error: Prometheus at {url} answered 401 "
                              "Unauthorized (set the bearer token's environment variable): "
                              "unauthorized: no token\n")
    finally:
        server.shutdown()
        server.server_close()


def test_text_csv_and_html(saved: Path, tmp_path: Path) -> None:
    text = cli("fleet", "metrics", "--from", saved)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[3].split() == ["WORKLOAD", "NOW", "RECOMMENDED", "CONF", "$/MO", "NOW",
                                "$/MO", "REC", "SAVES"]
    assert any(ln.startswith("ml/small") and "-> 1 x MIG 1g.10gb on A100 80GB SXM" in ln
               and ln.endswith("$1,307      $187    $1,120") for ln in lines)
    assert "Outcomes: keep 1, fewer-replicas 1, mig 1, time-share 0, smaller-gpu 0, idle 0, " \
           "inconclusive 2" in text.stdout
    table = cli("fleet", "metrics", "--from", saved, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert [r["workload"] for r in rows][:2] == ["ml/web", "ml/small"]
    assert rows[1]["recommended_resource"] == "nvidia.com/mig-1g.10gb"
    assert (rows[1]["namespace"], rows[1]["owner"]) == ("ml", "small")
    page = tmp_path / "fleet.html"
    html = cli("fleet", "metrics", "--from", saved, "--format", "html", "-o", page)
    assert html.returncode == 0, html.stderr

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[dict[str, str | None]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr" and dict(attrs).get("data-outcome"):
                self.found.append(dict(attrs))

    parser = Rows()
    parser.feed(page.read_text())
    assert [a["data-outcome"] for a in parser.found] == [
        "fewer-replicas", "mig", "keep", "inconclusive", "inconclusive"]
    again = cli("fleet", "metrics", "--from", saved, "--format", "html", "-o", page)
    assert again.stderr == f"rightsize: error: {page} already exists; pass --force to " \
                           "overwrite it\n"


def test_html_escapes_labels(tmp_path: Path) -> None:
    evil = [(n, {**lb, "namespace": "</script><b>x"}, p) for n, lb, p in scenarios()[:3]]
    f = tmp_path / "evil.json"
    f.write_bytes(_response(evil))
    out = cli("fleet", "metrics", "--from", f, "--format", "html")
    assert "&lt;/script&gt;&lt;b&gt;x/small" in out.stdout and "<b>x" not in out.stdout


def test_patches_validate_against_kubernetes(saved: Path, tmp_path: Path) -> None:
    pytest.importorskip("kubernetes_validate")
    out = cli("fleet", "metrics", "--from", saved, "--patches", tmp_path / "p")
    assert out.returncode == 0, out.stderr
    assert "3 validated against the Kubernetes 1.30.0 OpenAPI schemas" in out.stderr
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "ml-small.patch.yaml", "ml-web.hpa.yaml", "ml-web.keda-scaledobject.yaml",
        "ml-web.patch.yaml"]
    small = yaml.safe_load((tmp_path / "p" / "ml-small.patch.yaml").read_text())
    assert small["kind"] == "Deployment" and small["metadata"] == {"name": "small",
                                                                   "namespace": "ml"}
    res = small["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res == {"requests": {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/gpu": None},
                   "limits": {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/gpu": None}}
    web = yaml.safe_load((tmp_path / "p" / "ml-web.patch.yaml").read_text())
    assert web["spec"]["replicas"] == 1
    hpa = yaml.safe_load((tmp_path / "p" / "ml-web.hpa.yaml").read_text())
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 1)
    assert out.stdout.rstrip().endswith(
        f"next: kubectl patch --type strategic --patch-file {tmp_path / 'p'}/ml-web.patch.yaml")


def test_fast_and_slow_parsers_agree() -> None:
    body = _response(scenarios()[:4])
    fast, slow = parse_range(body), _slow(body)
    assert fast.labels == slow.labels and fast.points.equals(slow.points)
    assert fast.points.height == 4 * 2017
    pretty = json.dumps(json.loads(body), indent=2).encode()
    assert parse_range(pretty).points.equals(slow.points)


def test_a_nvidia_smi_log_is_one_workload(tmp_path: Path) -> None:
    log = tmp_path / "trainer.csv"
    rows = ["timestamp, index, name, utilization.gpu [%], memory.used [MiB]"]
    for i in range(24 * 12 + 1):  # a day at 300 s
        h, rest = divmod(i * STEP_S, 3600)
        rows.append(f"2026/01/01 {h % 24:02d}:{rest // 60:02d}:{rest % 60:02d}.000, 0, "
                    f"NVIDIA A100-SXM4-80GB, {90 if i % 10 == 0 else 3} %, 5000 MiB")
    log.write_text("\n".join(rows[:-1]) + "\n")
    out = cli("fleet", "metrics", "--from", log, "--gpu", "A100 80GB SXM", "--format", "json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["rows"]
    assert (row["workload"], row["gpu_util_p95_pct"], row["mem_used_peak_bytes"]) == (
        "trainer", 90.0, 5000 * 2**20)
    assert row["window_s"] == 23 * 3600 + 55 * 60
    assert T0 > 0
