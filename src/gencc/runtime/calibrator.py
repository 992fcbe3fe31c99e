"""A background thread that feeds decoded batches to a self-calibration at a bounded CPU share.

The dispatcher hands each decoded batch over with :meth:`BackgroundCalibrator.offer`,
which never blocks: a batch that finds the queue full is skipped (counted). The
thread scores at most ``cpu_share`` of one core: after scoring for t seconds of
its own CPU time it sleeps ``t * (1 - cpu_share) / cpu_share``. The decoder in
use is read from the calibration at each decode; a switch takes effect at the
next one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

__all__ = ["BackgroundCalibrator", "CPU_SHARE"]

log = logging.getLogger("gencc.runtime")

CPU_SHARE = 0.1  # of one core, for scoring candidate decoders
_QUEUE = 4  # decoded batches waiting to be scored; more are skipped


class BackgroundCalibrator:
    """Run ``calibration.observe`` on decoded batches in a daemon thread.

    Parameters
    ----------
    calibration : gencc.schemes.self_calibration.SelfCalibration
        Anything with ``observe(Y, returned)``, ``decoder`` and ``report()``.
    cpu_share : float, default ``CPU_SHARE``
        Most of one core the scoring may use, in (0, 1].
    """

    def __init__(self, calibration, cpu_share: float = CPU_SHARE):
        if not (isinstance(cpu_share, (int, float)) and 0 < cpu_share <= 1):
            raise ValueError(f"cpu_share must be in (0, 1], got {cpu_share!r}")
        self.calibration = calibration
        self.cpu_share = float(cpu_share)
        self.skipped = 0
        self.errors = 0
        self._queue: queue.Queue = queue.Queue(maxsize=_QUEUE)
        self._stop = threading.Event()
        self._pending = 0  # offered and not yet scored
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="gencc-self-calibration", daemon=True)
        self._thread.start()

    @property
    def decoder(self):
        return self.calibration.decoder

    def offer(self, Y, returned) -> bool:
        """Queue one decoded batch, ``Y`` of shape (len(returned), B, *out_shape); False if skipped."""
        if self._stop.is_set():
            return False
        with self._done:
            try:
                self._queue.put_nowait((Y, returned))
            except queue.Full:
                self.skipped += 1
                return False
            self._pending += 1
        return True

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued batch has been scored (for tests and reports); False on timeout."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout=timeout)

    def report(self) -> dict:
        out = self.calibration.report()
        out.update(cpu_share=self.cpu_share, skipped_batches=self.skipped, failed_batches=self.errors)
        return out

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)

    def _run(self):
        while not self._stop.is_set():
            try:
                Y, returned = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            t0 = time.thread_time()
            try:
                self.calibration.observe(Y, returned)
            except Exception:  # a batch the calibration cannot score must not stop the thread
                self.errors += 1
                log.warning("self-calibration failed on a batch", exc_info=True)
            busy = time.thread_time() - t0
            with self._done:
                self._pending -= 1
                self._done.notify_all()
            self._stop.wait(busy * (1 - self.cpu_share) / self.cpu_share)
