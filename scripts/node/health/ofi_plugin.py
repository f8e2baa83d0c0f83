"""Where NCCL's OFI plugin (aws-ofi-nccl, ``libnccl-net*.so``) is installed: the one lookup shared by the golden
image's checks (scripts/image/components/efa.yaml and gpu-validation.yaml embed this file's source) and the
node's EFA health check (``health.efa``), so an image that passes finds the plugin where every node looks.

The EFA installer puts it under /opt/amazon/ofi-nccl (``lib/`` or ``lib64/``, maybe deeper in a later release);
older images built it under /opt/aws-ofi-nccl. Every folder below those roots is searched.

Run as a script (the image's checks: ``python3 - [PREFIX]`` with this source on stdin; PREFIX is a fake root in
the tests, empty on an instance), it prints the plugin's path, or one line on stderr and exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

OFI_NCCL_ROOTS = ("/opt/amazon/ofi-nccl", "/opt/aws-ofi-nccl")
OFI_NCCL_GLOB = "libnccl-net*.so*"


def find_plugin(roots: Iterable[str] = OFI_NCCL_ROOTS, prefix: str = "") -> str | None:
    """The first plugin library (in path order) under the first root that holds one, or None."""
    for root in roots:
        found = sorted(Path(prefix + root).rglob(OFI_NCCL_GLOB))
        if found:
            return str(found[0])
    return None


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print((__doc__ or "").strip())
        return 0
    plugin = find_plugin(prefix=argv[0] if argv else "")
    if plugin is None:
        print(f"NCCL's OFI plugin ({OFI_NCCL_GLOB}) is not under {' or '.join(OFI_NCCL_ROOTS)}", file=sys.stderr)
        return 1
    print(plugin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
