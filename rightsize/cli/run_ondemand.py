"""``rightsize run --on-demand`` / ``--auto`` / ``--upload``: the options and their wiring.

The options decorate ``rightsize run``; :func:`settings` turns them into the profiler's
:class:`~rightsize.profiler.controller.CaptureSettings`; :func:`after_capture` says what happens
to each capture (:mod:`rightsize.cli.captures`), starting the upload thread when ``--upload``
is set. Only click is imported at module level.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from rightsize.errors import RightsizeError

if TYPE_CHECKING:
    from pathlib import Path

    from rightsize.profiler.controller import CaptureSettings
    from rightsize.profiler.upload import Uploader

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)?")
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--on-demand", is_flag=True,
                 help="No profiler until asked: rightsize trigger RUN_DIR (or --auto) records the "
                      "next steps of the running job into RUN_DIR/captures/<time>/."),
    click.option("--auto", is_flag=True,
                 help="With --on-demand: capture once the step time is steady, then every "
                      "--every or when it drifts by --drift."),
    click.option("--capture-steps", default=5, show_default=True, type=click.IntRange(1, 10_000),
                 help="Steps an automatic capture records."),
    click.option("--every", default="30m", show_default=True,
                 help="--auto: capture again after this long (90s, 30m, 2h; off)."),
    click.option("--drift", default="10%", show_default=True,
                 help="--auto: capture again when the steady step time moved this much (off)."),
    click.option("--steady-steps", default=50, show_default=True, type=click.IntRange(5, 256),
                 help="--auto: steps judged for steadiness."),
    click.option("--steady-pct", default=5.0, show_default=True, type=click.FloatRange(0.1, 100),
                 help="--auto: steady when 90% of those steps are this close to their median."),
    click.option("--max-captures", default=20, show_default=True, type=click.IntRange(1),
                 help="--auto: at most this many automatic captures."),
    click.option("--max-capture-mb", default=2048, show_default=True, type=click.IntRange(1),
                 help="--auto: no automatic capture once captures/ holds this much."),
    click.option("--capture-timeout-s", default=300.0, show_default=True,
                 type=click.FloatRange(1), help="A capture not complete after this long is "
                                                "finished with what it has."),
    click.option("--regression-pct", default=10.0, show_default=True, type=click.FloatRange(0),
                 help="A capture whose step is this much slower than the previous one's is "
                      "flagged as a regression."),
    click.option("--upload", "upload_url", metavar="URL", default=None,
                 help="Send each capture to this rightsize serve (token: $RIGHTSIZE_TOKEN); "
                      "queued on disk while it is unreachable."),
    click.option("--upload-wait-s", default=30.0, show_default=True, type=click.FloatRange(0),
                 help="After the job: time left to send queued captures (the rest stays queued "
                      "for rightsize upload RUN_DIR)."),
    click.option("--name", "job_name", default=None, help="The job's name (labels; default: "
                                                          "the script's)."),
    click.option("--team", default=None, help="The job's team (labels)."),
    click.option("--project", default=None, help="The job's project (labels)."),
    click.option("--workload", default=None, metavar="NAMESPACE/NAME",
                 help="The Kubernetes workload the job is, as fleet metrics names it (uploads "
                      "meet its metrics rows on /fleet); default: from the pod's environment."),
]
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def on_demand_options(f: Any) -> Any:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def parse_duration_s(text: str, what: str) -> float | None:
    """``90s``, ``30m``, ``2h``, ``1d``, a number of seconds, or ``off`` (None)."""
    value = text.strip().lower()
    if value in ("off", "none", "0"):
        return None
    m = _DURATION.fullmatch(value)
    if m is None or float(m[1]) <= 0:
        raise RightsizeError(f"{what} {text}: expected a duration like 90s, 30m, 2h, or off")
    return float(m[1]) * _UNITS_S[m[2] or "s"]


def parse_pct(text: str, what: str) -> float | None:
    """``10%``, ``10``, or ``off`` (None)."""
    value = text.strip().lower().removesuffix("%")
    if value in ("off", "none"):
        return None
    try:
        pct = float(value)
    except ValueError:
        pct = -1.0
    if not 0 < pct < 1000:
        raise RightsizeError(f"{what} {text}: expected a percentage like 10%, or off")
    return pct


def settings(opts: dict[str, Any]) -> CaptureSettings:
    """The profiler's capture settings from the options (one-line errors for bad values)."""
    from rightsize.profiler.autocapture import AutoPolicy
    from rightsize.profiler.controller import CaptureSettings

    if (opts["auto"] or opts["upload_url"]) and not opts["on_demand"]:
        raise RightsizeError("--auto and --upload need --on-demand")
    auto = None
    if opts["auto"]:
        auto = AutoPolicy(window=opts["steady_steps"], tolerance_pct=opts["steady_pct"],
                          every_s=parse_duration_s(opts["every"], "--every"),
                          drift_pct=parse_pct(opts["drift"], "--drift"),
                          max_captures=opts["max_captures"],
                          max_bytes=opts["max_capture_mb"] << 20)
    return CaptureSettings(steps=opts["capture_steps"], auto=auto,
                           timeout_s=opts["capture_timeout_s"])


def labels(opts: dict[str, Any], name: str) -> dict[str, str]:
    """The job's labels (the manifest's ``labels``, the uploads' query parameters)."""
    out = {"name": opts["job_name"] or name, "team": opts["team"], "project": opts["project"],
           **kubernetes(opts.get("workload"))}
    for key, value in out.items():
        if value is not None and (len(value) > 100 or not value.isprintable()):
            raise RightsizeError(f"--{key}: at most 100 printable characters")
    return {k: v for k, v in out.items() if v}


def kubernetes(workload: str | None, environ: dict[str, str] | None = None,
               sa_namespace: str = SA_NAMESPACE) -> dict[str, str]:
    """``namespace``, ``workload`` (and ``pod``) of the job: ``--workload NAMESPACE/NAME``, else
    on Kubernetes the pod's namespace (``POD_NAMESPACE``, else the service account's) and its
    name (``POD_NAME``, else ``HOSTNAME``) without its controller's suffixes, the owner fleet
    metrics gives the same pod (analyzers.fleet_metrics.workloads.owner)."""
    import os

    if workload:
        namespace, _, owner_name = workload.partition("/")
        if not namespace or not owner_name or "/" in owner_name:
            raise RightsizeError(f"--workload {workload}: expected NAMESPACE/NAME")
        return {"namespace": namespace, "workload": owner_name}
    env = os.environ if environ is None else environ
    namespace = env.get("POD_NAMESPACE", "").strip()
    if not namespace:
        try:
            with open(sa_namespace, encoding="utf-8") as fh:
                namespace = fh.read().strip()
        except OSError:
            return {}
    pod = (env.get("POD_NAME") or env.get("HOSTNAME") or "").strip()
    if not namespace or not pod:
        return {}
    from rightsize.analyzers.fleet_metrics.workloads import owner

    return {"namespace": namespace, "workload": owner(pod), "pod": pod}


class CaptureHandler:
    """``on_capture`` for the run: each capture handled (:func:`rightsize.cli.captures.handle`),
    the upload thread started with the first capture to send and given ``--upload-wait-s`` at
    the end (:meth:`close`)."""

    def __init__(self, opts: dict[str, Any], job_labels: dict[str, str],
                 warn: Callable[[str], None], say: Callable[[str], None]) -> None:
        from rightsize.cli.captures import AfterCapture

        url = opts["upload_url"]
        if url:
            from rightsize.profiler.upload import check_url

            url = check_url(url)
        self._wait_s = float(opts["upload_wait_s"])
        self._warn = warn
        self.uploader: Uploader | None = None
        self.after = AfterCapture(
            warn=warn, say=say, include_consumer=bool(opts["include_consumer"]),
            regression_pct=opts["regression_pct"], upload_url=url,
            labels={"job": job_labels.get("name"),
                    **{k: job_labels.get(k) for k in ("team", "project", "namespace",
                                                      "workload", "pod")}},
            wake_uploader=self._wake, analyze=not opts["no_report"])
        self._run_dir: Path | None = None

    def __call__(self, cap_dir: Path, manifest: dict[str, Any]) -> None:
        from rightsize.cli.captures import handle

        self._run_dir = cap_dir.parent.parent
        handle(self._run_dir, cap_dir, manifest, self.after)

    def _wake(self) -> None:
        if self.uploader is None and self._run_dir is not None:
            from rightsize.profiler.upload import Uploader

            self.uploader = Uploader(self._run_dir, self._warn)
            self.uploader.start()
        if self.uploader is not None:
            self.uploader.wake()

    def close(self) -> str | None:
        """The job ended: the queue gets its time; a line when captures stay queued."""
        if self.uploader is None:
            return None
        left = self.uploader.close(self._wait_s)
        if not left:
            return f"uploaded {self.uploader.sent} capture(s) to {self.after.upload_url}"
        return (f"{left} capture(s) not uploaded yet (queued in {self.uploader.run_dir}/uploads/"
                f"queue/); send them with: rightsize upload {self.uploader.run_dir}")
