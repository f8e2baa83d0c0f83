"""The node self-test's torch probe (selftest.py), run by the workload Python: CUDA is available, and one fp32
matmul on every GPU matches the CPU. Prints one line; exits non-zero with the reason otherwise.

    /opt/gpu-platform/venv/bin/python3 /opt/gpu-platform/node/torch_check.py
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int | str:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    import torch  # the workload Python's; imported here so that --help needs none

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}): torch.cuda.is_available() is False"
    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator().manual_seed(7)
    a, b = torch.randn(512, 512, generator=generator), torch.randn(512, 512, generator=generator)
    reference = a @ b
    for i in range(torch.cuda.device_count()):
        got = (a.to(f"cuda:{i}") @ b.to(f"cuda:{i}")).cpu()
        if not torch.allclose(got, reference, rtol=1e-3, atol=1e-3):
            return f"cuda:{i}: matmul differs from the CPU by {(got - reference).abs().max().item():.3g}"
    print(
        f"torch {torch.__version__} (CUDA {torch.version.cuda}): matmul on {torch.cuda.device_count()} GPU(s) "
        f"({torch.cuda.get_device_name(0)}) matches the CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
