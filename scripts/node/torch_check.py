"""The node self-test's torch probe (selftest.py), run by the workload Python: CUDA is available, and one fp32
matmul on every GPU matches the CPU. Prints one line; exits non-zero with the reason otherwise."""

import sys

import torch

if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} (CUDA {torch.version.cuda}): torch.cuda.is_available() is False")
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator().manual_seed(7)
a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
ref = a @ b
for i in range(torch.cuda.device_count()):
    got = (a.to(f"cuda:{i}") @ b.to(f"cuda:{i}")).cpu()
    if not torch.allclose(got, ref, rtol=1e-3, atol=1e-3):
        sys.exit(f"cuda:{i}: matmul differs from the CPU by {(got - ref).abs().max().item():.3g}")
print(
    f"torch {torch.__version__} (CUDA {torch.version.cuda}): matmul on {torch.cuda.device_count()} GPU(s) "
    f"({torch.cuda.get_device_name(0)}) matches the CPU"
)
