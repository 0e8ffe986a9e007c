"""The ``rightsize run --on-demand`` parent's side of captures: ``--auto``, and finishing every
capture (asked for by ``--auto`` or by ``rightsize trigger``) while the job runs.

A thread that, every ``tick_s``: reads the job's published step times (the lowest rank that
listens) and, with ``--auto``, asks for a capture when :func:`.autocapture.decide` says so;
follows each capture asked for (:func:`.capture.progress`) and, once every listening process
has finished its part (or ``timeout_s`` passed, or the job ended), has the sampler write what it
holds, finishes the capture as a run directory (:func:`.capture.finish`) and hands it to
``on_capture`` (the CLI: analysis, report, regression check, upload). The job never waits for
any of this: it runs in the ``rightsize`` process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rightsize.profiler import autocapture, capture
from rightsize.profiler.autocapture import AutoPolicy, Last, Pace
from rightsize.rundir import CAPTURES_DIR, read_json_file

# (capture directory, its manifest) -> None; must not raise
OnCapture = Callable[[Path, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """What ``rightsize run --on-demand`` was told about captures."""

    steps: int = 5  # steps of an automatic capture
    auto: AutoPolicy | None = None  # None: captures only when triggered
    timeout_s: float = 300.0  # a capture not finished this long after it was asked is finished as is
    tick_s: float = 0.5


class Controller:
    """Follows the captures of one on-demand run (see the module docstring)."""

    def __init__(self, run_dir: Path, job: Callable[[], dict[str, Any]], settings: CaptureSettings,
                 on_capture: OnCapture, warn: Callable[[str], None],
                 flush_samples: Callable[[], object] | None = None) -> None:
        self.run_dir = run_dir
        self._job = job  # the job's manifest as it is now
        self.settings = settings
        self._on_capture = on_capture
        self._warn = warn
        self._flush = flush_samples
        self.finished: list[str] = []
        self.auto_captures = 0
        self.held_back: str | None = None
        self.last: Last | None = None
        self.pace: Pace | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rightsize-captures", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, grace_s: float = 10.0) -> None:
        """The job ended: wait up to ``grace_s`` for the parts it wrote on its way out, finish
        every capture still open, and stop."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + grace_s
        while capture.pending(self.run_dir) and time.monotonic() < deadline:
            if all(self._ready(cap_id, ended=True) for cap_id in capture.pending(self.run_dir)):
                break
            time.sleep(0.1)
        for cap_id in capture.pending(self.run_dir):
            self._finish(cap_id, "the job ended before every process finished its part")

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.tick_s):
            try:
                self._tick()
            except Exception as exc:  # noqa: BLE001 - captures must never end the job's run
                self._warn(f"captures: {exc!r}")

    def _tick(self) -> None:
        open_ids = capture.pending(self.run_dir)
        for cap_id in open_ids:
            if self._ready(cap_id, ended=False):
                self._finish(cap_id, None)
            elif self._age_s(cap_id) > self.settings.timeout_s:
                self._finish(cap_id, f"finished as it was after {self.settings.timeout_s:g} s "
                                     "(--capture-timeout-s)")
        if self.settings.auto is not None and not open_ids:
            self._auto(self.settings.auto)

    def _ready(self, cap_id: str, ended: bool) -> bool:
        state = capture.progress(self.run_dir, cap_id)
        return state.complete or (ended and not state.waiting_for)

    def _age_s(self, cap_id: str) -> float:
        request = read_json_file(self.run_dir / CAPTURES_DIR / cap_id / "request.json") or {}
        try:
            asked = datetime.fromisoformat(str(request.get("requested_at")))
        except ValueError:
            return 0.0
        return time.time() - asked.timestamp()

    def _finish(self, cap_id: str, note: str | None) -> None:
        cap_dir = self.run_dir / CAPTURES_DIR / cap_id
        if not capture.claim(cap_dir):
            return  # rightsize trigger finishes it (it found no parent running)
        if self._flush is not None:
            self._flush()  # the window's samples on disk before they are cut
        manifest = capture.finish(self.run_dir, cap_id, self._job(), note)
        self.finished.append(cap_id)
        self._on_capture(cap_dir, manifest)

    def _auto(self, policy: AutoPolicy) -> None:
        published = capture.published(self.run_dir)
        if published is None:
            return
        step_s = published.get("step_s")
        steps = published.get("steps")
        if not isinstance(step_s, list) or not isinstance(steps, int):
            return
        self.pace = autocapture.pace(step_s, steps, policy)
        used = capture.captures_bytes(self.run_dir)
        self.held_back = autocapture.held_back(self.auto_captures, used, policy)
        now_s = time.monotonic()
        reason = autocapture.decide(self.pace, self.last, self.auto_captures, used, now_s, policy)
        if reason is None:
            return
        median_ms = None if self.pace.median_s is None else round(self.pace.median_s * 1e3, 3)
        capture.request_capture(self.run_dir, steps=self.settings.steps, reason=reason,
                                extra={"job_step_ms": median_ms})
        self.auto_captures += 1
        self.last = Last(now_s, self.pace.median_s if self.pace.steady else
                         (self.last.median_s if self.last else None))
