"""The log files of a GPU node that the CloudWatch agent ships, and who writes each.

A plain mapping with no CDK import: the fleet's agent config (``fleet.render.agent_config``)
and the node log groups are built from it, and the tests hold it against the writers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

#: Directory of the node logs; the fleet's user data creates it (0755) before the bootstrap runs.
NODE_LOG_DIR: Final = "/var/log/gpu-platform"

#: Node logs the agent ships: name -> file on the node. Every file has a writer:
#: ``bootstrap.sh`` writes bootstrap.log itself; each other one is the
#: ``StandardOutput=append:`` file of the unit ``<name>.service`` (scripts/node/systemd/), opened
#: by systemd outside the unit's read-only sandbox. The agent reads files, not the journal.
NODE_LOGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "bootstrap": f"{NODE_LOG_DIR}/bootstrap.log",
        "gpu-health": f"{NODE_LOG_DIR}/gpu-health.log",
        "spot-watcher": f"{NODE_LOG_DIR}/spot-watcher.log",
        "lifecycle-watcher": f"{NODE_LOG_DIR}/lifecycle-watcher.log",
        # The fleet's service (gpu-service.service), on served fleets (absent, so nothing shipped, elsewhere).
        "gpu-service": f"{NODE_LOG_DIR}/service.log",
    }
)
