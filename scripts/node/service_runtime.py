"""What the node's long-running services share: log lines on stdout, a clean stop on SIGTERM."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType


def configure_logging(log: logging.Logger) -> None:
    """``<service>: LEVEL message`` lines on stdout: the unit's ``StandardOutput=append:`` file under
    /var/log/gpu-platform, which the CloudWatch agent ships."""
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"{log.name}: %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def install_stop_handlers(stop: threading.Event, log: logging.Logger) -> None:
    """SIGTERM (systemd stop) and SIGINT set ``stop``: the polling loop ends after its current step."""

    def _stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
