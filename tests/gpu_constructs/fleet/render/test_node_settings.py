"""node_env, instance_type_facts, node_agent_config_json, service_json: what a fleet's node is told at boot."""

from __future__ import annotations

import json

from config.catalog import get_instance_type
from config.naming import ResourceNames
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.fleet.render.node_settings import (
    NodeSite,
    instance_type_facts,
    node_agent_config_json,
    node_env,
    service_json,
)
from tests.gpu_constructs.helpers import ACCOUNT, REGION, fleet
from tests.scripts.node.helpers import NODE_DIR  # noqa: F401 - puts scripts/node on sys.path

# isort: split
from serving.settings import parse  # the node's reader of service.json

NAMES = ResourceNames(env="dev", account=ACCOUNT, region=REGION)


def test_node_env_names_the_fleets_group_hooks_and_file_system() -> None:
    site = NodeSite(names=NAMES, fsx_dns_name="fs-1.fsx.us-east-1.amazonaws.com", fsx_mount_name="abcdef")
    env = node_env(site, fleet(name="train", containers=True))
    assert env["ASG_NAME"] == "gpu-platform-dev-train"
    assert (env["LAUNCH_HOOK_NAME"], env["TERMINATE_HOOK_NAME"]) == (
        "gpu-platform-dev-train-launch-hold", "gpu-platform-dev-train-terminate-hold",
    )  # fmt: skip
    assert env["METRIC_NAMESPACE"] == "GpuPlatform/dev" and env["AWS_REGION"] == REGION
    assert (env["FSX_DNS_NAME"], env["FSX_MOUNT_NAME"]) == (site.fsx_dns_name, "abcdef")
    assert (env["EFA_ENABLED"], env["CONTAINERS_ENABLED"]) == ("false", "true")
    assert env["CHECKPOINT_DIR"].startswith(env["FSX_MOUNT_POINT"] + "/")


def test_facts_count_efa_interfaces_only_for_an_efa_fleet() -> None:
    p4d = get_instance_type("p4d.24xlarge")
    efa = fleet(name="t", role="training", instance_types=["p4d.24xlarge"], efa=True, placement="cluster",
                availability_zones=["us-east-1a"])  # fmt: skip
    assert instance_type_facts(efa, [p4d])["p4d.24xlarge"] == {"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": True}
    plain = fleet(instance_types=["p4d.24xlarge"])
    assert instance_type_facts(plain, [p4d])["p4d.24xlarge"] == {
        "gpus": 8,
        "efa_interfaces": 0,
        "gpudirect_rdma": False,
    }


def test_agent_config_ships_every_node_log_to_its_group_and_publishes_in_the_namespace() -> None:
    config = json.loads(node_agent_config_json(NAMES))
    assert config["metrics"]["namespace"] == "GpuPlatform/dev"
    shipped = {f["file_path"]: f["log_group_name"] for f in config["logs"]["logs_collected"]["files"]["collect_list"]}
    assert shipped == {path: f"/gpu-platform/dev/node/{name}" for name, path in NODE_LOGS.items()}


def test_a_served_fleet_hands_its_service_to_the_node_as_the_node_reads_it() -> None:
    service = {"command": "python3 /opt/gpu-platform/examples/serve.py --port 8080", "port": 8080,
               "load_balancer": {"allowed_cidrs": ["10.0.0.0/16"]}}  # fmt: skip
    text = service_json(fleet(name="serve", service=service))
    assert text is not None and "\n" not in text  # one line: the user data's heredoc holds it as is
    node = parse(text)
    assert (node.port, node.health_check_path, node.mode, node.start_timeout_seconds) == (
        8080,
        "/health",
        "command",
        600,
    )
    assert node.command == service["command"] and node.image is None
    assert service_json(fleet(name="plain")) is None
