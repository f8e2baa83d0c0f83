"""Wait for the service's health check: ``GET http://127.0.0.1:<port><path>`` every ``--interval`` s until it
answers 200 (exit 0), the unit has failed (exit 1 at once: ``systemctl show`` says ActiveState=failed, e.g.
after its start limit) or ``--timeout`` s have passed (exit 1). Each outcome, and progress every 30 s, is one
line on stdout (the bootstrap's log); a failure names the last answer (a status, or why there was none).

The bootstrap completes the launch lifecycle hook with CONTINUE only after exit 0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

REQUEST_TIMEOUT_S = 5.0
PROGRESS_EVERY_S = 30.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def probe(url: str, timeout: float = REQUEST_TIMEOUT_S) -> tuple[bool, str]:
    """(answered 200, what it answered) for one GET."""
    try:
        with _NO_PROXY.open(url, timeout=timeout) as response:
            return response.status == 200, f"HTTP {response.status}"
    except urllib.error.HTTPError as err:
        return False, f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return False, f"no answer ({reason})"


def unit_state(systemctl: str, unit: str) -> dict[str, str]:
    """ActiveState, SubState, Result and NRestarts of the unit ({} when systemctl cannot tell)."""
    done = subprocess.run(
        [systemctl, "show", "--property=ActiveState,SubState,Result,NRestarts", unit],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {}
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def wait(
    url: str,
    *,
    timeout: float,
    interval: float,
    state: Callable[[], dict[str, str]] | None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, str]:
    started = clock()
    last = "no request yet"
    next_progress = started + PROGRESS_EVERY_S
    while True:
        healthy, last = probe(url, min(REQUEST_TIMEOUT_S, max(interval, 1.0)))
        elapsed = clock() - started
        if healthy:
            return True, f"{url} answered 200 after {elapsed:.0f} s"
        if state is not None:
            seen = state()
            if seen.get("ActiveState") == "failed":
                return False, (
                    f"the service's unit failed (Result={seen.get('Result', '?')}, restarts "
                    f"{seen.get('NRestarts', '?')}) after {elapsed:.0f} s; last answer of {url}: {last}"
                )
        if elapsed >= timeout:
            return False, f"{url} did not answer 200 within {timeout:.0f} s; last answer: {last}"
        if clock() >= next_progress:
            print(f"waiting for {url}: {last} after {elapsed:.0f} s", flush=True)
            next_progress += PROGRESS_EVERY_S
        sleep(min(interval, max(timeout - elapsed, 0.0)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m serving.wait", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True, help="the health check path, e.g. /health")
    parser.add_argument("--timeout", type=float, required=True, help="seconds")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between two requests")
    parser.add_argument("--unit", help="stop waiting once this systemd unit has failed")
    parser.add_argument("--systemctl", default="systemctl")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 1 <= args.port <= 65535 or not args.path.startswith("/") or args.timeout <= 0 or args.interval <= 0:
        print(
            "serving.wait: --port 1-65535, --path starting with /, positive --timeout and --interval", file=sys.stderr
        )
        return 2
    url = f"http://127.0.0.1:{args.port}{args.path}"
    state = (lambda: unit_state(args.systemctl, args.unit)) if args.unit else None
    healthy, message = wait(url, timeout=args.timeout, interval=args.interval, state=state)
    print(message, flush=True)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
