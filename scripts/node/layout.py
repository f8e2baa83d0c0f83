"""Where the node services live on a GPU instance, and the files the fleet's user data hands them.

The user data (gpu_constructs/fleet/render/user_data.py) creates CONFIG_DIR, writes ENV_FILE,
INSTANCE_TYPES_FILE, CLOUDWATCH_AGENT_CONFIG and, on a served fleet, SERVICE_FILE, unpacks this folder into
INSTALL_PREFIX and the examples into EXAMPLES_DIR, and runs
BOOTSTRAP. The names here are that contract; bootstrap.sh uses the same literals (a test keeps
them in step).
"""

from __future__ import annotations

NODE_OS = ("ubuntu", "24.04")
"""The operating system every node boots: the Deep Learning AMI's Ubuntu 24.04 (the parent of the golden AMI and
the AMI the fleets launch before one exists). Why this one: docs/architecture.md, "The node OS"."""

NODE_PYTHON = "/usr/bin/python3"
"""The interpreter every platform unit and the bootstrap run the node scripts with: the OS's own Python."""

NODE_PYTHON_VERSION = (3, 12)
"""NODE_PYTHON's version on NODE_OS (Ubuntu 24.04 ships Python 3.12). Every Python file that runs on a node is
checked against it (make test: mypy --python-version and vermin), not against the Python of the machine that
runs the tests."""

INSTALL_PREFIX = "/opt/gpu-platform/node"
"""Everything in scripts/node/ (Python modules, shell scripts, systemd/) is unpacked under this path."""

BOOTSTRAP = f"{INSTALL_PREFIX}/bootstrap.sh"
"""What the user data runs last, as root; it completes the launch lifecycle hook."""

CONFIG_DIR = "/etc/gpu-platform"

ENV_FILE = f"{CONFIG_DIR}/node.env"
"""KEY=value lines the user data writes and the systemd units read (EnvironmentFile=)."""

INSTANCE_TYPES_FILE = f"{CONFIG_DIR}/instance-types.json"
"""{"p4d.24xlarge": {"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": true}, ...}: the fleet's types."""

CLOUDWATCH_AGENT_CONFIG = f"{CONFIG_DIR}/cloudwatch-agent.json"
"""The CloudWatch agent configuration (gpu_constructs/fleet/render/agent_config.py renders it)."""

EFA_NODE_ENV_FILE = f"{CONFIG_DIR}/efa-node.env"
"""Per-instance-type EFA settings the bootstrap writes; the image's /etc/profile.d/gpu-platform-efa.sh reads it."""

NCCL_PROFILE = "/etc/profile.d/gpu-platform-nccl.sh"
"""Login-shell exports the bootstrap writes on EFA fleets (FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_DEBUG)."""

BOOTSTRAP_LOG = "/var/log/gpu-platform/bootstrap.log"
"""Mode 0644: the CloudWatch agent runs as cwagent and ships it."""

NODE_ENV_REQUIRED = (
    "GPU_PLATFORM_ENV",
    "AWS_REGION",
    "FLEET_NAME",
    "ASG_NAME",
    "LAUNCH_HOOK_NAME",
    "TERMINATE_HOOK_NAME",
    "METRIC_NAMESPACE",
    "FSX_DNS_NAME",
    "FSX_MOUNT_NAME",
    "EFA_ENABLED",
    "CONTAINERS_ENABLED",
)
"""Keys the user data must write to ENV_FILE (EFA_ENABLED and CONTAINERS_ENABLED: true or false)."""

NODE_ENV_OPTIONAL = {
    "FSX_MOUNT_POINT": "/fsx",
    "CHECKPOINT_DIR": "/fsx/checkpoints",
    "TRAINING_PID_DIR": "/run/gpu-platform/jobs",
    "HEALTH_DCGM_LEVEL": "1",
    "HEALTH_DCGM": "auto",
    "HEALTH_EXTRA_FATAL_XIDS": "",
}
"""Keys the user data may write, with the default that applies when they are absent."""

NODE_ENV_WRITTEN_BY_BOOTSTRAP = ("EXPECTED_GPUS", "EXPECTED_EFA")
"""Keys the bootstrap adds to ENV_FILE (from INSTANCE_TYPES_FILE) for gpu-health.service (EXPECTED_EFA: 0
unless EFA_ENABLED)."""

SCRATCH_MOUNT_POINT = "/scratch"
"""Node-local scratch file system (mode 1777) the bootstrap's scratch step mounts: NVMe instance store
where the type has it, else the launch template's scratch EBS volume; absent when neither exists."""

SCRATCH_EBS_DEVICE = "/dev/sdb"
"""DeviceName of the scratch EBS volume in the launch template; mount-scratch.sh finds its NVMe disk by it."""

SYSTEMD_UNIT_DIR = "/etc/systemd/system"

UNITS = (
    "gpu-health.service",
    "gpu-health.timer",
    "lifecycle-watcher.service",
    "lustre-mount.service",
    "spot-watcher.service",
    "gpu-service.service",
)
"""Unit files under systemd/ that the bootstrap copies into SYSTEMD_UNIT_DIR."""

LIFECYCLE_WATCHER_UNIT = "lifecycle-watcher.service"
"""Enabled and started early in the bootstrap (right after the units are installed), so that a node
terminated while still launching has its termination lifecycle hook completed too."""

LUSTRE_UNIT = "lustre-mount.service"
"""Enabled, then started by the bootstrap (``systemctl start`` blocks until the mount is done)."""

SERVICE_UNITS = ("gpu-health.timer", "spot-watcher.service")
"""Enabled and started (``enable --now``) by the bootstrap's last step, once the node is known good."""

CONTAINER_RUNTIME_UNIT = "docker.service"
"""Enabled and started when CONTAINERS_ENABLED=true (the parent DLAMI ships Docker and the NVIDIA toolkit)."""

SERVICE_FILE = f"{CONFIG_DIR}/service.json"
"""The fleet's service (``{"port", "health_check_path", "command" | null, "image" | null,
"start_timeout_seconds"}``), written by the user data of a served fleet only (serving/settings.py reads it)."""

GPU_SERVICE_UNIT = "gpu-service.service"
"""Runs the fleet's service; installed everywhere, enabled and started by the bootstrap's last step only where
SERVICE_FILE exists, which then waits for its health check before the launch hook's CONTINUE."""

GPU_SERVICE_DROP_IN = f"{GPU_SERVICE_UNIT}.d/50-service.conf"
"""Under SYSTEMD_UNIT_DIR: who runs the service and its start timeout (serving/unit.py renders it)."""

SERVICE_LOG = "/var/log/gpu-platform/service.log"
"""The service's stdout and stderr (gpu-service.service's StandardOutput=append:), shipped by the agent."""

WORKLOAD_VENV = "/opt/gpu-platform/venv"
"""The golden AMI's PyTorch virtual environment (scripts/image/components/pytorch.yaml): torch lives only here."""

BOOTSTRAP_PYTORCH_ENV = "/opt/pytorch"
"""The PyTorch environment of the Deep Learning AMI with PyTorch, the AMI the fleets launch until the first
golden AMI exists (``image.bootstrap_ami_parameter``): jobs and the service run from it there."""

WORKLOAD_PATH = (
    f"{WORKLOAD_VENV}/bin:{BOOTSTRAP_PYTORCH_ENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)
"""PATH of what runs the user's code (a training job's unit, gpu-service.service): the golden AMI's venv first,
so that ``python3`` and ``torchrun`` are the venv's and find torch; on the bootstrap AMI, which has no venv, the
Deep Learning AMI's own PyTorch environment. gpu-service.service spells it out (a test keeps it in step)."""

EXAMPLES_DIR = "/opt/gpu-platform/examples"
"""The repository's examples/ (serve.py, train_ddp.py), unpacked there by the user data from their own zip."""

ENABLED_UNITS = (LIFECYCLE_WATCHER_UNIT, LUSTRE_UNIT, *SERVICE_UNITS, GPU_SERVICE_UNIT)
"""Every unit of UNITS the bootstrap enables (GPU_SERVICE_UNIT only on a served fleet); gpu-health.service
itself is started by its timer."""

PLATFORM_UNITS = (LIFECYCLE_WATCHER_UNIT, *(unit for unit in SERVICE_UNITS if unit.endswith(".service")))
"""The platform's long-running units on every node (the termination and Spot watchers). The bootstrap abandons
the launch when one does not stay up after its start; in service, gpu_health counts those that are down
(PlatformUnitsDown), with GPU_SERVICE_UNIT where SERVICE_FILE exists."""

IMAGE_VERSIONS_FILE = "/opt/gpu-platform/image-versions.json"
"""What the golden AMI really carries (driver, CUDA, DCGM, EFA, NCCL, torch, kernel), written by its build
(config/image_components.py, same path); absent on the bootstrap Deep Learning AMI."""

HEALTH_STATE_DIR = "/run/gpu-platform/health"
"""gpu-health.service's RuntimeDirectory= (0700, preserved between runs, gone at a reboot): what the platform's units
looked like at the previous health check (units.json), so that a unit systemd restarted since counts as down."""
