"""The training example's checkpoint code (examples/checkpointing.py, no torch) and the example's command
line. The example itself needs torch and GPUs; the contract it relies on is tested here and, with the node's
real checkpoint hook and job runner, in tests/scripts/node/jobs/test_job_checkpoint_flow.py."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import checkpointing as ckpt  # noqa: E402
import train_ddp  # noqa: E402 - imports torch only inside main()


def test_a_checkpoint_is_written_under_a_dot_name_then_renamed(tmp_path: Path) -> None:
    seen_while_writing: list[list[str]] = []

    def write(path: Path) -> None:
        path.write_bytes(b"weights")
        seen_while_writing.append(sorted(p.name for p in path.parent.iterdir()))
        assert ckpt.complete_checkpoints(path.parent) == []  # a reader never takes the partial file

    final = ckpt.write_atomically(tmp_path / "job", 42, write)
    assert seen_while_writing == [[".step-000000042.pt"]]
    assert final.name == "step-000000042.pt" and final.read_bytes() == b"weights"
    assert sorted(p.name for p in final.parent.iterdir()) == ["step-000000042.pt"]


def test_resume_takes_the_newest_complete_and_readable_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "job"
    for step in (100, 200, 300):
        ckpt.write_atomically(directory, step, lambda p, s=step: p.write_text(str(s)))
    (directory / ".step-000000400.pt").write_text("400, half written")  # a writer that died
    (directory / "step-000000300.pt").write_text("")  # truncated by a dying node: unreadable
    (directory / "latest.pt").write_text("999")  # not a step checkpoint of this contract
    (directory / "step-000000900.pt.tmp").write_text("900")

    def read(path: Path) -> int:
        text = path.read_text()
        if not text:
            raise EOFError("empty")
        return int(text)

    assert [s for s, _ in ckpt.complete_checkpoints(directory)] == [100, 200, 300]
    assert ckpt.load_newest(directory, read) == (200, 200)
    assert ckpt.load_newest(tmp_path / "fresh", read) is None


def test_prune_keeps_the_newest_and_never_touches_writes_in_progress(tmp_path: Path) -> None:
    directory = tmp_path / "job"
    for step in range(1, 6):
        ckpt.write_atomically(directory, step, lambda p: p.write_bytes(b"w"))
    (directory / ".step-000000006.pt").write_bytes(b"w")
    deleted = ckpt.prune(directory, keep=2)
    assert [p.name for p in deleted] == [ckpt.step_name(s) for s in (1, 2, 3)]
    assert sorted(p.name for p in directory.iterdir()) == [
        ".step-000000006.pt",
        "step-000000004.pt",
        "step-000000005.pt",
    ]


def test_sigusr1_asks_for_a_checkpoint_at_the_end_of_the_step() -> None:
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        requests = ckpt.CheckpointRequests(every=10)
        assert [requests.due(s) for s in (1, 2, 10)] == [False, False, True]
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)  # a second signal before the save: the same request
        assert [requests.due(s) for s in (11, 12)] == [True, False]
        on_request_only = ckpt.CheckpointRequests(every=0)
        assert not on_request_only.due(100)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_pid_file_is_the_jobs_own_only_outside_the_runner(tmp_path: Path) -> None:
    env = {"TRAINING_PID_DIR": str(tmp_path)}
    alone = ckpt.PidFile("llama", env)
    assert alone.register()
    assert (tmp_path / "llama.pid").read_text() == f"{os.getpid()}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["llama.pid"]  # no temporary file left behind
    alone.remove()
    supervised = ckpt.PidFile("llama", {**env, ckpt.SUPERVISED_ENV: "1"})
    assert not supervised.register()
    assert list(tmp_path.iterdir()) == []


def test_off_a_platform_node_the_job_runs_without_a_pid_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "run" / "gpu-platform" / "jobs"
    alone = ckpt.PidFile("llama", {"TRAINING_PID_DIR": str(missing)})
    assert not alone.register()
    assert not missing.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{missing} is missing" in line and "SIGUSR1 still checkpoints" in line
    alone.remove()  # nothing to remove: no error either


def test_the_job_name_comes_from_the_runner_and_follows_the_contract() -> None:
    assert ckpt.job_id({ckpt.JOB_ID_ENV: "llama-7b.run_2"}) == "llama-7b.run_2"
    assert ckpt.job_id({}, default="local") == "local"
    assert ckpt.job_checkpoint_dir("j", {}) == Path("/fsx/checkpoints/j")
    for bad in ("", "../x", ".hidden", "a" * 129):
        with pytest.raises(ValueError, match="GPU_PLATFORM_JOB_ID"):
            ckpt.job_id({ckpt.JOB_ID_ENV: bad})


def test_the_example_reads_lustre_and_uses_the_contract_calls() -> None:
    args = train_ddp.parse_args([])
    assert args.data_dir == "/fsx/datasets" and args.checkpoint_every == 100
    assert train_ddp.parse_args(["--checkpoint-every", "0"]).checkpoint_every == 0
    tree = ast.parse((EXAMPLES / "train_ddp.py").read_text())
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "checkpointing"
    }
    assert called == {
        "job_id",
        "CheckpointRequests",
        "PidFile",
        "job_checkpoint_dir",
        "load_newest",
        "write_atomically",
        "prune",
    }
    assert all(hasattr(ckpt, name) for name in called)


FAKE_TORCH = """
import os, pathlib, sys, time
here = pathlib.Path(os.environ["FAKE_TORCH_DIR"])
(here / "importing").touch()
deadline = time.monotonic() + 30
while not (here / "release").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
(here / "survived").touch()
os._exit(0)  # the rest of the job needs the real torch and GPUs
"""


def test_a_signal_while_torch_is_imported_does_not_kill_the_worker(tmp_path: Path) -> None:
    """``import torch`` and the NCCL set-up take seconds on a GPU node; a checkpoint request (SIGUSR1) or a
    stop (SIGTERM) in that time must find the handlers installed, not the default action (end the process)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch/__init__.py").write_text(FAKE_TORCH)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "FAKE_TORCH_DIR": str(tmp_path),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "GPU_PLATFORM_JOB_ID": "early-signal",
        "GPU_PLATFORM_JOB_SUPERVISED": "1",
    }
    worker = subprocess.Popen([sys.executable, str(EXAMPLES / "train_ddp.py"), "--steps", "1"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "importing").exists():
            assert worker.poll() is None and time.monotonic() < deadline, "the example never imported torch"
            time.sleep(0.02)
        worker.send_signal(signal.SIGUSR1)  # the checkpoint hook
        worker.send_signal(signal.SIGTERM)  # a stop
        time.sleep(0.3)
        (tmp_path / "release").touch()
        assert worker.wait(timeout=30) == 0
        assert (tmp_path / "survived").exists()
    finally:
        worker.kill()
        worker.wait()
