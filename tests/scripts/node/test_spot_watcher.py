"""spot_watcher.py against a fake IMDSv2 server on 127.0.0.1: notices, token expiry, no notice."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts.node.helpers import FakeImds

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import spot_watcher
from imds_client import ImdsClient
from spot_watcher import INTERRUPTION, NOTICE_PATHS, REBALANCE, Notice, SpotWatcher

ACTION_PATH = NOTICE_PATHS[INTERRUPTION]
REBALANCE_PATH = NOTICE_PATHS[REBALANCE]
TERMINATE = json.dumps({"action": "terminate", "time": "2026-11-20T09:14:00Z"})
REBALANCE_BODY = json.dumps({"noticeTime": "2026-11-20T09:02:11Z"})


class RecordingHook:
    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.calls: list[Notice] = []
        self.called = threading.Event()

    def __call__(self, notice: Notice) -> int:
        self.calls.append(notice)
        self.called.set()
        return self.code

    @property
    def kinds(self) -> list[str]:
        return [notice.kind for notice in self.calls]


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    with FakeImds() as server:
        yield server


def watcher_for(imds: FakeImds, hook: RecordingHook, **kwargs: bool) -> SpotWatcher:
    return SpotWatcher(ImdsClient(imds.url, timeout_s=2), hook, **kwargs)


def test_no_notice_never_runs_the_hook(imds: FakeImds) -> None:
    hook = RecordingHook()
    watcher = watcher_for(imds, hook)

    assert watcher.run(0.001, max_polls=5) == 0

    assert hook.calls == []
    assert watcher.polls == 5
    assert imds.token_puts == 1  # one token serves every poll
    assert imds.gets == [(ACTION_PATH, 404), (REBALANCE_PATH, 404)] * 5


def test_interruption_notice_runs_the_hook_once_and_exits(imds: FakeImds) -> None:
    imds.set(ACTION_PATH, TERMINATE)
    hook = RecordingHook()
    watcher = watcher_for(imds, hook)

    assert watcher.run(0.001, max_polls=50) == 0

    assert watcher.polls == 1
    assert hook.kinds == [INTERRUPTION]
    assert (hook.calls[0].action, hook.calls[0].time) == ("terminate", "2026-11-20T09:14:00Z")


def test_rebalance_runs_the_hook_once_and_keeps_watching_for_the_interruption(imds: FakeImds) -> None:
    imds.set(REBALANCE_PATH, REBALANCE_BODY)
    hook = RecordingHook()
    watcher = watcher_for(imds, hook)

    for _ in range(3):
        watcher.poll_once()
    assert hook.kinds == [REBALANCE]
    assert hook.calls[0].time == "2026-11-20T09:02:11Z"
    assert not watcher.done()
    assert imds.gets[-1] == (ACTION_PATH, 404)  # the handled rebalance path is no longer read

    imds.set(ACTION_PATH, TERMINATE)
    watcher.poll_once()
    assert hook.kinds == [REBALANCE, INTERRUPTION]
    assert watcher.done()


def test_both_notices_at_once_checkpoint_for_the_interruption_and_exit(imds: FakeImds) -> None:
    imds.set(ACTION_PATH, TERMINATE)
    imds.set(REBALANCE_PATH, REBALANCE_BODY)
    hook = RecordingHook()

    assert watcher_for(imds, hook).run(0.001, max_polls=10) == 0
    assert hook.kinds == [INTERRUPTION]


def test_keep_watching_handles_each_kind_once_and_goes_on(imds: FakeImds) -> None:
    imds.set(ACTION_PATH, TERMINATE)
    imds.set(REBALANCE_PATH, REBALANCE_BODY)
    hook = RecordingHook()
    watcher = watcher_for(imds, hook, keep_watching=True)

    assert watcher.run(0.001, max_polls=4) == 0
    assert watcher.polls == 4
    assert hook.kinds == [INTERRUPTION, REBALANCE]


def test_a_failing_hook_is_not_retried(imds: FakeImds) -> None:
    imds.set(REBALANCE_PATH, REBALANCE_BODY)
    hook = RecordingHook(code=3)
    watcher = watcher_for(imds, hook)
    for _ in range(3):
        watcher.poll_once()
    assert hook.kinds == [REBALANCE]


def test_expired_token_mid_run_is_replaced_and_the_notice_still_handled(imds: FakeImds) -> None:
    hook = RecordingHook()
    watcher = watcher_for(imds, hook)
    watcher.poll_once()
    watcher.poll_once()
    assert imds.token_puts == 1

    imds.expire_tokens()  # IMDS now answers 401 to the token the watcher holds
    imds.set(ACTION_PATH, TERMINATE)
    watcher.poll_once()

    assert imds.unauthorized == 1
    assert imds.token_puts == 2
    assert hook.kinds == [INTERRUPTION]
    assert watcher.done()


def test_token_is_renewed_before_its_ttl_ends(imds: FakeImds) -> None:
    now = [1000.0]
    client = ImdsClient(imds.url, token_ttl_s=60, clock=lambda: now[0])
    assert client.get(ACTION_PATH) is None
    now[0] += 30
    assert client.get(ACTION_PATH) is None
    assert imds.token_puts == 1
    now[0] += 25  # 55 s into a 60 s token: inside the renewal margin
    assert client.get(ACTION_PATH) is None

    assert imds.token_puts == 2
    assert imds.unauthorized == 0
    assert imds.ttl_headers == ["60", "60"]


def test_unreachable_imds_is_logged_and_polling_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hook = RecordingHook()
    watcher = SpotWatcher(ImdsClient(f"http://127.0.0.1:{port}", timeout_s=1), hook)

    assert watcher.run(0.001, max_polls=3) == 0
    assert hook.calls == []
    assert "cannot read the interruption notice" in caplog.text


def test_stop_event_ends_the_watch(imds: FakeImds) -> None:
    stop = threading.Event()
    watcher = watcher_for(imds, RecordingHook())
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(watcher.run(0.01, stop=stop)))
    thread.start()
    stop.set()
    thread.join(timeout=5)
    assert result == [0]


def test_cli_runs_the_hook_command_with_the_notice_in_its_environment(imds: FakeImds, tmp_path: Path) -> None:
    out = tmp_path / "hook.out"
    record = "import os, sys; open(sys.argv[1], 'a').write(' '.join(os.environ[k] for k in sys.argv[2:]) + '\\n')"
    hook = shlex.join([sys.executable, "-c", record, str(out), "NOTICE_KIND", "NOTICE_ACTION", "NOTICE_TIME"])
    imds.set(ACTION_PATH, TERMINATE)

    code = spot_watcher.main(
        ["--imds-url", imds.url, "--interval", "0.01", "--max-polls", "20", "--token-ttl", "120", "--hook", hook],
        stop=threading.Event(),
    )

    assert code == 0
    assert out.read_text() == "interruption terminate 2026-11-20T09:14:00Z\n"
    assert imds.ttl_headers == ["120"]


def test_a_hook_that_does_not_exist_is_reported(tmp_path: Path) -> None:
    hook = spot_watcher.CommandHook([str(tmp_path / "missing-hook.sh")])
    assert hook(spot_watcher.parse_notice(REBALANCE, REBALANCE_BODY)) == 127


def test_default_hook_is_the_checkpoint_script_next_to_the_watcher() -> None:
    assert Path(spot_watcher.DEFAULT_HOOK).name == "checkpoint-hook.sh"
    assert Path(spot_watcher.DEFAULT_HOOK).is_file()


def test_a_notice_body_that_is_not_json_is_still_a_notice() -> None:
    notice = spot_watcher.parse_notice(INTERRUPTION, "terminate")
    assert notice.kind == INTERRUPTION
    assert notice.action == ""
    assert notice.body == "terminate"
