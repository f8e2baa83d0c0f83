"""The training contract end to end, on a job the runner started: the node is told to go -> the real
checkpoint-hook.sh reads the job's pid file (the supervisor's) and sends SIGUSR1 -> the supervisor passes it
to the training workers -> rank 0 writes a checkpoint atomically under <CHECKPOINT_DIR>/<job>/ -> the hook
sees it and exits 0; the node stops the job; the job is relaunched under the same name and resumes from the
newest COMPLETE checkpoint (a dot-file left by a writer that died is not one). The workers use the training
example's own checkpoint code (examples/checkpointing.py)."""

from __future__ import annotations

from tests.scripts.node.jobs.support import JobNode, events, run_hook, start

JOB = "llama-resume"
UNIT = f"gpu-job-{JOB}.service"


def test_the_hook_checkpoints_a_runner_job_which_then_resumes_from_its_newest_complete_checkpoint(
    job_node: JobNode,
) -> None:
    node = job_node
    node.worker_env(steps=100_000, every=0, step_s=0.05)  # long; checkpoints only when asked
    command = f"python3 {node.path('/fsx/work/train_standin.py')}"
    code, _, err = start(node, JOB, command)
    assert code == 0, err
    pid_file = node.pid_dir / f"{JOB}.pid"
    node.wait_for("the pid file", pid_file.exists)
    node.wait_for("both workers", lambda: len(events(node, "start")) == 2)
    checkpoints = node.checkpoints / JOB
    checkpoints.mkdir(parents=True, exist_ok=True)
    # A write in progress (dot-file) of a later step: never a checkpoint, for the hook or for a resume.
    (checkpoints / ".step-000090000.pt").write_text('{"step": 90000}')

    hook = run_hook(node)

    assert hook.returncode == 0, hook.stderr
    assert f"job {JOB}: sent SIGUSR1 to pid {pid_file.read_text().strip()}" in hook.stderr
    (saved,) = events(node, "checkpoint")
    assert saved["rank"] == 0
    assert f"new checkpoint file: {checkpoints / saved['path']}" in hook.stderr
    assert node.units()[UNIT]["ActiveState"] == "active"  # the job goes on training after the checkpoint

    # The node goes: systemd stops the unit (SIGTERM); the workers save once more and exit.
    code, stopped, _ = node.runner("stop", JOB)
    assert code == 0 and stopped["state"] == "failed" and stopped["exit_code"] == 1  # torchrun, stopped by signal
    last = events(node, "checkpoint")[-1]["step"]
    assert last >= saved["step"]
    # A node that dies mid-write leaves a dot-file newer than every complete checkpoint.
    (checkpoints / f".step-{last + 50_000:09d}.pt").write_text("half a checkp")

    code, _, err = start(node, JOB, command)  # job run --resume: same JobId on a fresh start
    assert code == 0, err
    node.wait_for("the relaunched workers", lambda: len(events(node, "start")) == 4)
    resumed = events(node, "start")[2:]
    assert {worker["step"] for worker in resumed} == {last}
    node.runner("stop", JOB)
    names = sorted(p.name for p in checkpoints.iterdir())
    assert ".step-000090000.pt" in names and f".step-{last + 50_000:09d}.pt" in names  # left alone, never read
