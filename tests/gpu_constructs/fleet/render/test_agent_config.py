"""The node's CloudWatch agent config: accepted by the agent's own schema, and publishing what alarms expect."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema import Draft4Validator

from gpu_constructs.fleet.render.agent_config import NodeLogFile, agent_config, to_json
from gpu_constructs.fleet.render.agent_metrics import (
    AGGREGATION_DIMENSIONS,
    AUTO_SCALING_GROUP_NAME,
    DISK_USED_PERCENT,
    GPU_MEASUREMENTS,
    GPU_SECTION,
    INSTANCE_ID,
    MEM_USED_PERCENT,
    SUPPORTED_GPU_MEASUREMENTS,
    GpuMeasurement,
    fleet_dimensions,
    gpu_metric_name,
    metric_names,
    namespace_for,
    published_metrics,
)
from tests.reference import reference_path

NAMESPACE = "GpuPlatform/dev"
NODE_LOGS = (
    NodeLogFile("bootstrap", "/var/log/gpu-platform/bootstrap.log", "/gpu-platform/dev/node/bootstrap"),
    NodeLogFile("gpu-health", "/var/log/gpu-platform/gpu-health.log", "/gpu-platform/dev/node/gpu-health"),
    NodeLogFile("spot-watcher", "/var/log/gpu-platform/spot-watcher.log", "/gpu-platform/dev/node/spot-watcher"),
)

EXPECTED_GPU_METRICS = {
    "nvidia_smi_utilization_gpu",
    "nvidia_smi_utilization_memory",
    "nvidia_smi_memory_used",
    "nvidia_smi_memory_total",
    "nvidia_smi_temperature_gpu",
    "nvidia_smi_power_draw",
    "nvidia_smi_clocks_current_sm",
    "nvidia_smi_clocks_current_memory",
}


@pytest.fixture(scope="module")
def validator() -> Draft4Validator:
    schema = json.loads(reference_path("cloudwatch-agent-schema.json").read_text(encoding="utf-8"))
    Draft4Validator.check_schema(schema)
    return Draft4Validator(schema)


@pytest.fixture
def config() -> dict[str, Any]:
    return agent_config(namespace=NAMESPACE, log_files=NODE_LOGS)


def _errors(validator: Draft4Validator, config: dict[str, Any]) -> list[str]:
    return sorted(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(config)
    )


# --------------------------------------------------------------------------- the agent's schema


def test_config_is_valid_for_the_agent_schema(validator: Draft4Validator, config: dict[str, Any]) -> None:
    assert _errors(validator, config) == []


def test_config_without_logs_is_valid_and_has_no_logs_section(validator: Draft4Validator) -> None:
    config = agent_config(namespace=NAMESPACE, log_files=(), metrics_interval_s=10, disk_paths=("/", "/opt/dlami/nvme"))
    assert "logs" not in config
    assert _errors(validator, config) == []


def _misspelled_measurement(c: dict[str, Any]) -> None:
    gpu = c["metrics"]["metrics_collected"][GPU_SECTION]
    gpu["measurment"] = gpu.pop("measurement")


def _string_interval(c: dict[str, Any]) -> None:
    c["metrics"]["metrics_collected"][GPU_SECTION]["metrics_collection_interval"] = "60"


def _misspelled_metrics_key(c: dict[str, Any]) -> None:
    c["metrics"]["aggregation_dimension"] = c["metrics"].pop("aggregation_dimensions")


def _misspelled_log_key(c: dict[str, Any]) -> None:
    entry = c["logs"]["logs_collected"]["files"]["collect_list"][0]
    entry["log_group"] = entry.pop("log_group_name")


def _retention_not_allowed_by_logs(c: dict[str, Any]) -> None:
    c["logs"]["logs_collected"]["files"]["collect_list"][0]["retention_in_days"] = 10


@pytest.mark.parametrize(
    ("breakage", "where", "message"),
    [
        (_misspelled_measurement, f"metrics/metrics_collected/{GPU_SECTION}", "'measurement' is a required property"),
        (
            _string_interval,
            f"metrics/metrics_collected/{GPU_SECTION}/metrics_collection_interval",
            "is not of type 'integer'",
        ),
        (_misspelled_metrics_key, "metrics", "'aggregation_dimension' was unexpected"),
        (_misspelled_log_key, "logs/logs_collected/files/collect_list/0", "'log_group' was unexpected"),
        (_retention_not_allowed_by_logs, "logs/logs_collected/files/collect_list/0/retention_in_days", "is not one of"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else "",
)
def test_schema_rejects_a_broken_config(
    validator: Draft4Validator, config: dict[str, Any], breakage, where: str, message: str
) -> None:
    broken = copy.deepcopy(config)
    breakage(broken)
    errors = _errors(validator, broken)
    # Rejected for the reason planted, not for another one.
    assert any(e.startswith(f"{where}: ") and message in e for e in errors), errors


def test_gpu_section_has_exactly_the_expected_keys(config: dict[str, Any]) -> None:
    """The schema does not reject unknown keys in a metric section (a misspelled
    ``metrics_colection_interval`` would pass and be ignored), so pin the keys here."""
    collected = config["metrics"]["metrics_collected"]
    assert set(collected) == {GPU_SECTION, "mem", "disk"}
    assert set(collected[GPU_SECTION]) == {"measurement", "metrics_collection_interval"}
    assert set(collected["mem"]) == {"measurement"}
    assert set(collected["disk"]) == {"measurement", "resources", "ignore_file_system_types", "drop_device"}


# --------------------------------------------------------------------------- what is published


def test_gpu_measurements_cover_utilization_memory_temperature_power_and_clocks(config: dict[str, Any]) -> None:
    measured = config["metrics"]["metrics_collected"][GPU_SECTION]["measurement"]
    assert measured == list(GPU_MEASUREMENTS)
    assert {
        "utilization_gpu",
        "utilization_memory",
        "memory_used",
        "memory_total",
        "temperature_gpu",
        "power_draw",
        "clocks_current_sm",
        "clocks_current_memory",
    } <= set(measured)
    assert len(measured) == len(set(measured))


def test_gpu_measurements_are_on_the_agent_allow_list() -> None:
    """A name the agent does not know is dropped without a metric: none may slip in."""
    assert set(GPU_MEASUREMENTS) <= SUPPORTED_GPU_MEASUREMENTS


def test_published_gpu_metric_names() -> None:
    assert gpu_metric_name("utilization_gpu") == "nvidia_smi_utilization_gpu"
    assert GpuMeasurement.TEMPERATURE_GPU.metric_name == "nvidia_smi_temperature_gpu"
    assert {gpu_metric_name(m) for m in GPU_MEASUREMENTS} == EXPECTED_GPU_METRICS


@pytest.mark.parametrize("measurement", ["fan_speed", "utilisation_gpu", "nvidia_smi_utilization_gpu", ""])
def test_no_name_for_a_gpu_metric_that_is_not_collected(measurement: str) -> None:
    with pytest.raises(ValueError, match="not a GPU measurement the nodes collect"):
        gpu_metric_name(measurement)


def test_both_sides_agree_on_the_published_metric_names(config: dict[str, Any]) -> None:
    expected = EXPECTED_GPU_METRICS | {MEM_USED_PERCENT, DISK_USED_PERCENT}
    assert set(metric_names()) == expected
    assert len(metric_names()) == len(expected)
    assert published_metrics(config) == expected
    assert MEM_USED_PERCENT == "mem_used_percent"
    assert DISK_USED_PERCENT == "disk_used_percent"


def test_published_metrics_follows_the_agent_naming_rules() -> None:
    config = {
        "metrics": {
            "metrics_collected": {
                GPU_SECTION: {"measurement": ["nvidia_smi_power_draw", {"name": "temperature_gpu"}]},
                "mem": {"measurement": [{"name": "used_percent", "rename": "MemoryUsed", "unit": "Percent"}]},
            }
        }
    }
    assert published_metrics(config) == {"nvidia_smi_power_draw", "nvidia_smi_temperature_gpu", "MemoryUsed"}
    assert published_metrics({}) == frozenset()


# --------------------------------------------------------------------------- namespace and dimensions


def test_namespace_is_the_environment_namespace(config: dict[str, Any]) -> None:
    assert namespace_for("dev") == NAMESPACE
    assert config["metrics"]["namespace"] == NAMESPACE


def test_namespace_agrees_with_the_resource_names() -> None:
    """config.naming also names the namespace (for IAM conditions): the two must agree."""
    naming = pytest.importorskip("config.naming")
    names = naming.ResourceNames(env="staging", account="111111111111", region="us-east-1")
    assert names.metrics_namespace == namespace_for("staging")


@pytest.mark.parametrize("namespace", ["", "AWS/EC2", "GpuPlatform/dév", "x" * 256, "   "])
def test_invalid_namespace_is_refused(namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        agent_config(namespace=namespace, log_files=NODE_LOGS)


def test_append_dimensions_identify_instance_and_fleet(config: dict[str, Any]) -> None:
    append = config["metrics"]["append_dimensions"]
    assert append[INSTANCE_ID] == "${aws:InstanceId}"
    assert append[AUTO_SCALING_GROUP_NAME] == "${aws:AutoScalingGroupName}"
    assert append["InstanceType"] == "${aws:InstanceType}"
    assert config["agent"]["omit_hostname"] is True


def test_metrics_are_aggregated_per_fleet_and_per_node(config: dict[str, Any]) -> None:
    aggregation = config["metrics"]["aggregation_dimensions"]
    assert aggregation == [["AutoScalingGroupName"], ["AutoScalingGroupName", "InstanceId"]]
    assert aggregation == [list(a) for a in AGGREGATION_DIMENSIONS]
    # Every aggregation is built from appended dimensions, or the agent has nothing to aggregate by.
    assert {d for dims in aggregation for d in dims} <= set(config["metrics"]["append_dimensions"])
    assert fleet_dimensions("gpu-platform-dev-train") == {"AutoScalingGroupName": "gpu-platform-dev-train"}


def test_interval_applies_to_the_agent_and_the_gpu_section() -> None:
    config = agent_config(namespace=NAMESPACE, log_files=NODE_LOGS, metrics_interval_s=30)
    assert config["agent"]["metrics_collection_interval"] == 30
    assert config["metrics"]["metrics_collected"][GPU_SECTION]["metrics_collection_interval"] == 30


def test_agent_runs_unprivileged(config: dict[str, Any]) -> None:
    assert config["agent"]["run_as_user"] == "cwagent"


def test_disk_reports_listed_mount_points_only(config: dict[str, Any]) -> None:
    disk = config["metrics"]["metrics_collected"]["disk"]
    assert disk["resources"] == ["/"]
    assert {"tmpfs", "overlay", "lustre"} <= set(disk["ignore_file_system_types"])
    assert disk["drop_device"] is True


# --------------------------------------------------------------------------- logs


def test_every_node_log_is_shipped_once_to_its_group(config: dict[str, Any]) -> None:
    collect = config["logs"]["logs_collected"]["files"]["collect_list"]
    assert [(e["file_path"], e["log_group_name"]) for e in collect] == [
        (f.file_path, f.log_group_name) for f in NODE_LOGS
    ]
    assert len({e["file_path"] for e in collect}) == len(NODE_LOGS)
    for entry in collect:
        assert entry["log_stream_name"] == "{instance_id}"
        # The CDK app owns the log groups, their retention and their key.
        assert "retention_in_days" not in entry
        assert "log_group_class" not in entry
    assert config["logs"]["force_flush_interval"] == 5


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("interval", [0, -1, 172_801, "60", 60.0, True])
def test_invalid_interval_is_refused(interval: Any) -> None:
    with pytest.raises(ValueError, match="metrics_interval_s"):
        agent_config(namespace=NAMESPACE, log_files=NODE_LOGS, metrics_interval_s=interval)


def test_duplicate_log_is_refused() -> None:
    twice = (*NODE_LOGS, NodeLogFile("bootstrap", "/var/log/other.log", "/gpu-platform/dev/node/other"))
    with pytest.raises(ValueError, match="node log name 'bootstrap' appears twice"):
        agent_config(namespace=NAMESPACE, log_files=twice)
    same_file = (*NODE_LOGS, NodeLogFile("again", NODE_LOGS[0].file_path, "/gpu-platform/dev/node/again"))
    with pytest.raises(ValueError, match=r"file_path .* appears twice"):
        agent_config(namespace=NAMESPACE, log_files=same_file)


@pytest.mark.parametrize("paths", [("/", "/"), ("relative",), ("*",)])
def test_invalid_disk_paths_are_refused(paths: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="disk path"):
        agent_config(namespace=NAMESPACE, log_files=NODE_LOGS, disk_paths=paths)


@pytest.mark.parametrize(
    ("name", "file_path", "group", "match"),
    [
        ("Bootstrap", "/var/log/b.log", "/gpu-platform/dev/node/b", "node log name"),
        ("bootstrap", "var/log/b.log", "/gpu-platform/dev/node/b", "absolute path"),
        ("bootstrap", "/var/log/b.log", "${Token[TOKEN.123]}", "log group name"),
        ("bootstrap", "/var/log/b.log", "", "log group name"),
    ],
)
def test_invalid_node_log_is_refused(name: str, file_path: str, group: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NodeLogFile(name, file_path, group)


def test_json_is_stable_and_round_trips(config: dict[str, Any]) -> None:
    text = to_json(config)
    assert json.loads(text) == config
    assert text == to_json(agent_config(namespace=NAMESPACE, log_files=NODE_LOGS))
    assert "${aws:AutoScalingGroupName}" in text


def test_each_call_returns_a_fresh_config(config: dict[str, Any]) -> None:
    config["metrics"]["append_dimensions"]["Extra"] = "x"
    config["metrics"]["aggregation_dimensions"][0].append("Extra")
    fresh = agent_config(namespace=NAMESPACE, log_files=NODE_LOGS)
    assert "Extra" not in fresh["metrics"]["append_dimensions"]
    assert fresh["metrics"]["aggregation_dimensions"][0] == ["AutoScalingGroupName"]
