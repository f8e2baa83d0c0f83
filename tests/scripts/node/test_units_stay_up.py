"""A unit the bootstrap starts must stay up: the real bootstrap.sh, the fake systemd of tests/scripts/node/fake_units.py
running a real process for the unit (its output in the file its installed unit file names), and the launch hook on
the moto-backed endpoint. `systemctl enable --now` of a Type=simple unit succeeds even when its program dies a
moment later; the bootstrap looks again after UNIT_SETTLE_S and abandons the launch with the unit's last lines."""

from __future__ import annotations

import shlex
import sys

from tests.scripts.node.fake_node import Node, assert_abandoned, lifecycle_call
from tests.scripts.node.helpers import UNIT_DIR, unit_output_file

SHOW = "systemctl show --property=ActiveState,SubState,Result,NRestarts"
PYTHON = shlex.quote(sys.executable)


def crash(message: str, after_s: float = 0.3) -> str:
    """A Python program that runs for ``after_s`` and dies of an uncaught exception (exit 1, traceback on stderr)."""
    program = f"import time; time.sleep({after_s}); raise RuntimeError({message!r})"
    return f"exec {PYTHON} -c {shlex.quote(program)}"


def test_a_watcher_that_crashes_after_its_start_abandons_the_launch_with_its_traceback(node: Node) -> None:
    node.units.runs("lifecycle-watcher.service", crash("IMDS token refused (stand-in)"))
    node.env["UNIT_SETTLE_S"] = "2"
    result = node.run()

    assert_abandoned(node, result, "units")
    assert (
        "lifecycle-watcher.service does not stay up: failed/failed (result exit-code, 0 restarts) 2 s after its start"
        in result.log
    )
    # Its own log, the file its installed unit file names, holds the traceback; its journal says how it ended.
    log_file = unit_output_file(UNIT_DIR / "lifecycle-watcher.service")
    assert f"the last lines of {log_file}:" in result.log
    assert "Traceback (most recent call last):" in result.log
    assert "  RuntimeError: IMDS token refused (stand-in)" in result.log  # the traceback's last line, indented
    assert "journalctl --unit lifecycle-watcher.service --boot --lines=20 --no-pager --output=short-iso" in result.calls
    assert "lifecycle-watcher.service: Main process exited, code=exited, status=1/FAILURE" in result.log
    assert not any(call.startswith("fi_info") for call in result.calls)  # nothing after the step ran


def test_a_unit_that_systemd_restarted_during_the_settle_time_abandons(node: Node) -> None:
    # The Spot watcher dies once at start; systemd (Restart=on-failure) starts it again and it stays up.
    crashed_once = node.tmp / "crashed-once"
    # It dies 0.5 s after its start, so that the first look (right after the start) sees it before the restart even
    # on a loaded machine; at once, that look could already count the restart and nothing would grow after it.
    first_run_crashes = (
        f"[[ -e {crashed_once} ]] && exec sleep 30; touch {crashed_once}; {crash('no IMDS (stand-in)', 0.5)}"
    )
    node.units.runs("spot-watcher.service", first_run_crashes, restarts=1)
    node.env["UNIT_SETTLE_S"] = "2.5"
    result = node.run()

    assert_abandoned(node, result, "services")
    assert (
        "spot-watcher.service does not stay up: active/running (result success, 1 restarts) 2.5 s after its start"
        in result.log
    )
    assert "  RuntimeError: no IMDS (stand-in)" in result.log  # from spot-watcher.log
    assert result.calls.count(f"{SHOW} spot-watcher.service") == 2


def test_a_watcher_that_keeps_running_lets_the_launch_continue(node: Node) -> None:
    node.units.runs("lifecycle-watcher.service", "exec sleep 30")
    node.env["UNIT_SETTLE_S"] = "0.3"
    result = node.run()

    assert result.returncode == 0, result.log
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]
    assert "lifecycle-watcher.service active, not restarted, 0.3 s after the start" in result.log
    assert "gpu-health.timer spot-watcher.service active, not restarted, 0.3 s after the start" in result.log
    assert not any(call.startswith("journalctl") for call in result.calls)
