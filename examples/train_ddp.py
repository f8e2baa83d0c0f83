"""A training job for the platform's training fleets: PyTorch DDP over NCCL (EFA between nodes), started
by torchrun on every node of the job, which checkpoints and resumes the way the node expects.

    gpu-platform job run --env dev --fleet training --nodes 2 -- \
        python3 /opt/gpu-platform/examples/train_ddp.py --steps 2000 --checkpoint-every 200

The node's job runner turns ``python3 train_ddp.py ARGS`` into ``torchrun --nnodes N --nproc-per-node G
--rdzv-backend c10d ... train_ddp.py ARGS``; torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and the rendezvous
for each process. The job's name comes from GPU_PLATFORM_JOB_ID (the runner sets it; ``--job-id`` outside
the runner).

- **Data**: every ``*.pt`` file under ``--data-dir`` (``/fsx/datasets``, Lustre over the data bucket's
  ``datasets/`` prefix) holds ``{"x": float tensor [n, features], "y": long tensor [n]}``; with no such file
  the job trains on a synthetic classification set (seeded, the same on every rank), so the example runs on
  a fresh environment. Each rank reads its share (DistributedSampler).
- **Checkpoints**: every ``--checkpoint-every`` steps, and at the end of the step during which SIGUSR1
  arrived (the node's checkpoint hook: Spot interruption, rebalance, scale-in), and on SIGTERM (the job is
  stopped) before exiting. A request seen by any rank is shared with all (one small all-reduce per step), and
  rank 0 writes ``/fsx/checkpoints/<job>/step-N.pt`` as ``.step-N.pt`` first, then renames it.
- **Resume**: a restart (torchrun's ``--max-restarts``, or ``gpu-platform job run --resume JOB``) loads the
  newest complete checkpoint (dot-files are writes in progress, never read) and goes on from its step.

On a machine without a GPU it runs on the CPU over gloo (one process per node is enough there), as in
``train_ddp.sbatch``'s runs of the Slurm tests.

Replace the model and the data with your own; keep the checkpoint calls (checkpointing.py, no torch).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # checkpointing.py beside this file

import checkpointing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DDP training that follows the platform's checkpoint contract")
    parser.add_argument("--data-dir", default="/fsx/datasets", help="*.pt shards of {'x', 'y'} (default %(default)s)")
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps in all (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=256, help="per GPU (default %(default)s)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=100, help="steps; 0: on request only")
    parser.add_argument("--keep", type=int, default=3, help="complete checkpoints kept (default %(default)s)")
    parser.add_argument("--job-id", default=None, help="outside the runner: the job's name")
    parser.add_argument("--synthetic-samples", type=int, default=65536)
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--classes", type=int, default=10)
    return parser.parse_args(argv)


def load_dataset(torch: Any, args: argparse.Namespace) -> Any:
    """The shards under ``--data-dir`` as one TensorDataset, or the synthetic set when there are none."""
    from torch.utils.data import TensorDataset

    shards = sorted(Path(args.data_dir).glob("*.pt")) if Path(args.data_dir).is_dir() else []
    if shards:
        parts = [torch.load(path, map_location="cpu", weights_only=True) for path in shards]
        return TensorDataset(torch.cat([p["x"] for p in parts]).float(), torch.cat([p["y"] for p in parts]).long())
    generator = torch.Generator().manual_seed(1234)
    x = torch.randn(args.synthetic_samples, args.features, generator=generator)
    teacher = torch.randn(args.features, args.classes, generator=generator)
    return TensorDataset(x, (x @ teacher).argmax(dim=1))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    job = checkpointing.job_id(default=args.job_id)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])

    # The handlers first, before `import torch` and the NCCL set-up (seconds on a GPU node): a checkpoint
    # request or a stop in that time is kept for the first step, not the default action (end the process).
    # Then register (outside the runner only: its supervisor owns the pid file).
    requests = checkpointing.CheckpointRequests(args.checkpoint_every)
    stop_asked = []
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop_asked.append(True))
    pid_file = checkpointing.PidFile(job)
    if local_rank == 0:
        pid_file.register()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)  # bound to this GPU: barriers need not guess it
    else:  # no GPU (a CPU node, a laptop, the Slurm tests): the same job on the CPU over gloo
        device = torch.device("cpu")
        dist.init_process_group("gloo")

    dataset = load_dataset(torch, args)
    features = dataset.tensors[0].shape[1]
    classes = int(dataset.tensors[1].max()) + 1
    model = torch.nn.Sequential(torch.nn.Linear(features, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, classes)).to(
        device
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    directory = checkpointing.job_checkpoint_dir(job)

    step = 0
    resumed = checkpointing.load_newest(directory, lambda p: torch.load(p, map_location="cpu", weights_only=True))
    if resumed:
        step, state = resumed
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if gpu else None)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    if rank == 0:
        where = f"resumed from step {step}" if resumed else "fresh start"
        print(f"job {job}: {dist.get_world_size()} processes, {len(dataset)} samples, {where}", flush=True)

    def save() -> None:
        if rank == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            path = checkpointing.write_atomically(directory, step, lambda p: torch.save(state, p))
            checkpointing.prune(directory, args.keep)
            print(f"job {job}: checkpoint {path}", flush=True)
        dist.barrier()  # nobody runs ahead of a checkpoint it may have to resume from

    loss_fn = torch.nn.CrossEntropyLoss()
    epoch = step * args.batch_size * dist.get_world_size() // max(1, len(dataset))
    stopping = False
    while step < args.steps and not stopping:
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
            loss.backward()
            optimizer.step()
            step += 1
            # One request anywhere is a request everywhere: [checkpoint, stop] as 0/1, reduced with MAX.
            flags = torch.tensor([requests.due(step), bool(stop_asked)], dtype=torch.int32, device=device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            checkpoint_now, stopping = bool(flags[0]), bool(flags[1])
            if checkpoint_now or stopping:
                save()
            if rank == 0 and step % 50 == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if stopping or step >= args.steps:
                break
        epoch += 1
    if not stopping and rank == 0:
        print(f"job {job}: done at step {step}", flush=True)
    if local_rank == 0:
        pid_file.remove()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
