#!/usr/bin/env python3
"""Node self-test: every probe a GPU node runs, each with its verdict, on the machine it runs on.

    python3 /opt/gpu-platform/node/selftest.py                 # on a node (as root: dmesg, dcgmi)
    python3 scripts/node/selftest.py --workload-path "$PATH" --examples examples --instance-type none

Probes, in order: ``gpu`` (nvidia-smi and the kernel log's Xids, judged by the health check's own
``evaluate``), ``dcgm`` (``dcgmi diag -r LEVEL -j``), ``fabric`` (NVSwitch types: Fabric Manager / fabric
state), ``efa`` (fi_info's efa devices against ``--efa-devices``), ``ofi-nccl`` (NCCL's OFI plugin, the
lookup the health check uses), ``torch`` (the workload Python: CUDA available, one matmul per GPU against
the CPU), ``service`` (the example model server answers its health path) and ``image`` (the versions the
golden AMI records it carries). Each prints one line
``PASS|FAIL|SKIP <probe> <detail>``; a SKIP says why (a tool absent, nothing expected). Exit 0 when no
probe failed, 1 otherwise, 2 on bad usage. The health check's modules are imported, never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gpu_health
from health.decide import evaluate, fabric_reasons
from health.efa import efa_reasons, find_ofi_nccl
from health.parse import parse_smi_csv
from health.probe import NVIDIA_SMI_COMMAND, read_efa, read_fabric, read_kernel_log, run_command, run_dcgm_diag
from layout import EXAMPLES_DIR, IMAGE_VERSIONS_FILE, WORKLOAD_PATH

#: The torch probe's script, run by the workload Python (a file, so the node-Python check reads it too).
TORCH_CHECK = Path(__file__).resolve().with_name("torch_check.py")


@dataclass(frozen=True)
class Verdict:
    probe: str
    status: str  # PASS, FAIL or SKIP
    detail: str

    def line(self) -> str:
        return f"{self.status:<4} {self.probe:<9} {self.detail}"


def _health_args(args: argparse.Namespace, expected: int) -> argparse.Namespace:
    """The health check's own arguments, so its probes read the tools exactly as on a node."""
    argv = ["--once", "--expected-gpus", str(expected), "--efa-devices", str(args.efa_devices)]
    argv += ["--instance-type", args.instance_type] if args.instance_type else []
    return gpu_health.build_parser().parse_args(argv)


def probe_image(args: argparse.Namespace) -> Verdict:
    path = Path(args.image_versions)
    try:
        versions = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Verdict("image", "SKIP", f"no {path}: not a golden AMI (the bootstrap Deep Learning AMI?)")
    except (OSError, ValueError) as err:
        return Verdict("image", "FAIL", f"{path} cannot be read: {err}")
    if not isinstance(versions, dict) or not versions:
        return Verdict("image", "FAIL", f"{path} holds no versions")
    return Verdict("image", "PASS", "golden AMI: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))


def probe_gpu(args: argparse.Namespace) -> tuple[Verdict, int]:
    smi = run_command(NVIDIA_SMI_COMMAND, 30)
    if smi.not_found:
        return Verdict("gpu", "FAIL", "nvidia-smi is not installed: no NVIDIA driver"), 0
    seen = len(parse_smi_csv(smi.stdout).gpus)
    expected = args.expected_gpus if args.expected_gpus is not None else seen
    report = evaluate(smi, read_kernel_log(), expected)
    names = sorted({row.name for row in parse_smi_csv(smi.stdout).gpus})
    detail = f"{seen} GPU(s) ({', '.join(names) or 'none'}), {expected} expected"
    if not report.healthy:
        return Verdict("gpu", "FAIL", f"{detail}: {'; '.join(report.reasons)}"), expected
    notes = f"; warnings: {'; '.join(report.warnings)}" if report.warnings else ""
    return Verdict("gpu", "PASS", detail + notes), expected


def probe_dcgm(args: argparse.Namespace) -> Verdict:
    outcome = run_dcgm_diag(args.dcgm_level, 900)
    if outcome is None:
        return Verdict("dcgm", "SKIP", "dcgmi is not installed (the golden AMI's dcgm component installs it)")
    if outcome.error:
        return Verdict("dcgm", "FAIL", f"dcgmi diag -r {args.dcgm_level}: {outcome.error}")
    if outcome.failures:
        return Verdict("dcgm", "FAIL", f"dcgmi diag -r {args.dcgm_level}: {'; '.join(outcome.failures)}")
    return Verdict("dcgm", "PASS", f"dcgmi diag -r {args.dcgm_level}: {len(outcome.results)} results, none failed")


def probe_fabric(health: argparse.Namespace) -> Verdict:
    if health.instance_type in (None, "none"):
        return Verdict("fabric", "SKIP", "instance type not known (--instance-type none): no NVSwitch check")
    fabric, skipped = read_fabric(health, replaying=False)
    if fabric is None:
        return Verdict("fabric", "SKIP", skipped or f"{health.instance_type} has no NVSwitch fabric")
    reasons = fabric_reasons(fabric, [])
    return Verdict("fabric", "FAIL" if reasons else "PASS", "; ".join(reasons) or "NVSwitch fabric up")


def probe_efa(health: argparse.Namespace) -> Verdict:
    efa = read_efa(health)
    if efa is None:
        return Verdict("efa", "SKIP", "no EFA interface expected (--efa-devices 0)")
    reasons = efa_reasons(efa)
    detail = f"{len(efa.fi_info.devices)} efa device(s), {efa.expected_devices} expected"
    return Verdict("efa", "FAIL" if reasons else "PASS", f"{detail}: {'; '.join(reasons)}" if reasons else detail)


def probe_ofi_nccl(args: argparse.Namespace) -> Verdict:
    found = find_ofi_nccl()
    if found:
        return Verdict("ofi-nccl", "PASS", found)
    if args.efa_devices > 0:
        return Verdict("ofi-nccl", "FAIL", "NCCL's OFI plugin is not installed: NCCL would not use EFA")
    return Verdict("ofi-nccl", "SKIP", "not installed, and no EFA interface expected")


def _workload_python(args: argparse.Namespace) -> str | None:
    return shutil.which("python3", path=args.workload_path)


def probe_torch(args: argparse.Namespace) -> Verdict:
    python = _workload_python(args)
    if python is None:
        return Verdict("torch", "FAIL", f"no python3 on the workload PATH {args.workload_path}")
    done = subprocess.run([python, str(TORCH_CHECK)], capture_output=True, text=True, timeout=600, check=False)
    last = (done.stdout.strip() or done.stderr.strip()).splitlines()[-1:] or ["no output"]
    return Verdict("torch", "PASS" if done.returncode == 0 else "FAIL", f"{python}: {last[0]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def probe_service(args: argparse.Namespace) -> Verdict:
    python, serve = _workload_python(args), os.path.join(args.examples, "serve.py")
    if python is None or not os.path.isfile(serve):
        return Verdict("service", "FAIL", f"cannot start the example service: {serve} or python3 missing")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/health"
    env = {**os.environ, "PATH": args.workload_path}
    server = subprocess.Popen(
        [python, serve, "--port", str(port), "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        return _wait_healthy(server, url, args.service_timeout)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


def _wait_healthy(server: subprocess.Popen[str], url: str, timeout_s: float) -> Verdict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            output = (server.stdout.read() if server.stdout else "").strip().splitlines()[-1:] or ["no output"]
            return Verdict("service", "FAIL", f"serve.py exited {server.returncode}: {output[0]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - loopback only
                if answer.status == 200:
                    return Verdict("service", "PASS", f"{url} answered 200: {answer.read(200).decode()}")
        except OSError:
            pass
        time.sleep(1)
    return Verdict("service", "FAIL", f"{url} did not answer 200 within {timeout_s:g} s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expected-gpus", type=int, default=_env_int("EXPECTED_GPUS"))
    parser.add_argument("--efa-devices", type=int, default=_env_int("EXPECTED_EFA") or 0)
    parser.add_argument("--dcgm-level", type=int, choices=(1, 2, 3, 4), default=1)
    parser.add_argument("--instance-type", help="default: from IMDS; 'none' off EC2 (no NVSwitch check)")
    parser.add_argument("--workload-path", default=WORKLOAD_PATH, help="PATH of jobs and the service")
    parser.add_argument("--examples", default=EXAMPLES_DIR, help="the folder of serve.py")
    parser.add_argument("--image-versions", default=IMAGE_VERSIONS_FILE, help="what the golden AMI records")
    parser.add_argument("--service-timeout", type=float, default=180.0)
    parser.add_argument("--skip", action="append", default=[], help="a probe not to run (repeatable)")
    return parser


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    gpu, expected = probe_gpu(args) if "gpu" not in args.skip else (Verdict("gpu", "SKIP", "--skip gpu"), 0)
    health = _health_args(args, max(expected, 1))
    probes: dict[str, Callable[[], Verdict]] = {
        "image": lambda: probe_image(args),
        "dcgm": lambda: probe_dcgm(args),
        "fabric": lambda: probe_fabric(health),
        "efa": lambda: probe_efa(health),
        "ofi-nccl": lambda: probe_ofi_nccl(args),
        "torch": lambda: probe_torch(args),
        "service": lambda: probe_service(args),
    }
    verdicts = [gpu]
    print(gpu.line(), flush=True)
    for name, probe in probes.items():
        verdict = Verdict(name, "SKIP", f"--skip {name}") if name in args.skip else probe()
        print(verdict.line(), flush=True)
        verdicts.append(verdict)
    failed = [v.probe for v in verdicts if v.status == "FAIL"]
    passed = sum(v.status == "PASS" for v in verdicts)
    print(f"selftest: FAILED {', '.join(failed)}" if failed else f"selftest: ok ({passed} passed, the rest skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
