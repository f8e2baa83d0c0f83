"""gpu_health.py: the decision on recorded outputs, and the AWS actions against moto."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from tests.scripts.node.health.support import NAMESPACE, REGION, Fleet, health_of, load_case, replay_args
from tests.scripts.node.helpers import FIXTURES, FakeImds

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import gpu_health
import health.act as health_act
import health.probe as health_probe
from gpu_health import METRIC_NAME
from health.act import NodeIdentity
from health.dcgm import DcgmOutcome, parse_dcgm_json
from health.decide import HealthReport, evaluate
from health.parse import SmiResult, parse_smi_csv, parse_xids, pci_key
from health.xids import FATAL_XIDS, parse_extra_xids

HEALTHY_GPU = "0, NVIDIA A100-SXM4-40GB, 00000000:10:1C.0, Enabled, 0, 31\n"


def decide(name: str, **kwargs: Any) -> HealthReport:
    case = load_case(name)
    return evaluate(case.smi, case.kernel_log, 8, **kwargs)


# ---------------------------------------------------------------------------------------------
# The decision on each recorded case
# ---------------------------------------------------------------------------------------------


def test_healthy_p4d_is_healthy() -> None:
    report = decide("p4d_healthy")
    assert report == HealthReport(healthy=True, reasons=[], warnings=[])


def test_missing_gpu_7_of_8() -> None:
    report = decide("p4d_missing_gpu")
    assert not report.healthy
    assert len(report.reasons) == 1
    assert report.reasons[0].startswith("GPU count is 7, expected 8 (seen: 0 (00000000:10:1C.0), ")


def test_uncorrectable_ecc_error() -> None:
    report = decide("p4d_ecc_error")
    assert not report.healthy
    assert report.reasons[0] == "GPU 3 (00000000:20:1D.0): 2 uncorrectable volatile ECC errors"
    assert report.reason_classes == ["ecc"]
    # the same event in the kernel log: contained ECC error (twice) and a pending row remap, which
    # NVIDIA resolves by restarting the application / ignoring: warnings beside the ECC counter's reason
    assert any(line.startswith("Xid 94 on GPU 3 (PCI 0000:20:1d) [x2]: Contained memory") for line in report.warnings)
    assert any(line.startswith("Xid 63 on GPU 3 (PCI 0000:20:1d): GPU memory remapping") for line in report.warnings)


def test_xid_79_gpu_fell_off_the_bus() -> None:
    report = decide("p4d_xid79")
    assert not report.healthy
    xid = [reason for reason in report.reasons if reason.startswith("Xid 79")]
    assert xid == [
        "Xid 79 on PCI 0000:a0:1c (no GPU of nvidia-smi at that address): GPU has fallen off the bus "
        "(ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS); NVIDIA: RESTART_BM "
        "(kernel: pid=51877, name=python3, GPU has fallen off the bus.)"
    ]
    # nvidia-smi tells the same story: exit 15, one handle lost, seven GPUs left
    assert "nvidia-smi exited 15" in report.reasons
    assert "nvidia-smi: Unable to determine the device handle for GPU0000:A0:1C.0: Unknown Error" in report.reasons
    assert any(reason.startswith("GPU count is 7, expected 8") for reason in report.reasons)


def test_xid_79_alone_is_enough() -> None:
    """The kernel log decides even when nvidia-smi still looks fine."""
    report = evaluate(load_case("p4d_healthy").smi, load_case("p4d_xid79").kernel_log, 8)
    assert not report.healthy
    assert [reason[:31] for reason in report.reasons] == ["Xid 79 on GPU 6 (PCI 0000:a0:1c"]


def test_driver_that_does_not_answer() -> None:
    report = decide("driver_not_loaded")
    assert report.reasons == [
        "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    ]


def test_persistence_mode_off_is_a_warning_to_fix_not_a_failure() -> None:
    """The node turns it back on (nvidia-smi -pm 1); replacing a node mid-job for it would cost the job."""
    report = decide("p4d_persistence_off")
    assert report.healthy and report.reasons == []
    assert report.persistence_off == [0, 1, 2, 3, 4, 5, 6, 7]
    (warning,) = report.warnings
    assert warning.startswith("persistence mode is not Enabled on GPU 0 (00000000:10:1C.0), 1 (")
    assert warning.endswith(
        "is nvidia-persistenced running? (not a failure: the node turns it on with nvidia-smi -pm 1)"
    )


def test_nvidia_smi_that_hangs_is_a_failure() -> None:
    report = evaluate(SmiResult(returncode=None, stdout="", timed_out=True), "", 8, smi_timeout_s=30)
    assert report.reasons == ["nvidia-smi did not answer within 30 s: the NVIDIA driver is hung"]


def test_nvidia_smi_missing_is_a_failure() -> None:
    report = evaluate(SmiResult(returncode=None, stdout="", not_found=True), "", 1)
    assert report.reasons == ["nvidia-smi not found: the NVIDIA driver utilities are not installed"]


def test_expected_count_comes_from_the_caller() -> None:
    assert evaluate(SmiResult(0, HEALTHY_GPU), "", 1).healthy
    assert not evaluate(load_case("p4d_healthy").smi, "", 4).healthy


# ---------------------------------------------------------------------------------------------
# Xids
# ---------------------------------------------------------------------------------------------


def test_fatal_set_covers_at_least_the_agreed_xids() -> None:
    assert {48, 61, 62, 64, 74, 79, 95, 119, 120} <= set(FATAL_XIDS)


def test_application_xids_are_warnings_only() -> None:
    log = (
        "kernel: NVRM: Xid (PCI:0000:10:1c): 13, pid=7781, name=python3, Graphics SM Warp Exception on "
        "(GPC 0, TPC 1, SM 0): Out Of Range Address\n"
        "kernel: NVRM: Xid (PCI:0000:10:1c): 31, pid=7781, name=python3, Ch 00000008, intr 00000000. "
        "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_1c000000. Fault is of type FAULT_PDE\n"
    )
    report = evaluate(SmiResult(0, HEALTHY_GPU), log, 1)
    assert report.healthy
    assert [warning[:40] for warning in report.warnings] == [
        "Xid 13 on GPU 0 (PCI 0000:10:1c): Graphi",
        "Xid 31 on GPU 0 (PCI 0000:10:1c): GPU me",
    ]


def test_fatal_set_is_configurable() -> None:
    log = "NVRM: Xid (PCI:0000:10:1c): 13, pid=7781, name=python3, Graphics Exception\n"
    report = evaluate(SmiResult(0, HEALTHY_GPU), log, 1, extra_xids=parse_extra_xids("13, 79"))
    assert report.reasons == [
        "Xid 13 on GPU 0 (PCI 0000:10:1c): Graphics Engine Exception made unhealthy by the fleet's "
        "health.extra_fatal_xids (kernel: pid=7781, name=python3, "
        "Graphics Exception)"
    ]


def test_xid_lines_in_older_and_dmesg_formats() -> None:
    log = (
        "[ 5107.644336] NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus.\n"
        "[ 5107.644399] NVRM: GPU 0000:03:00.0: GPU has fallen off the bus.\n"
        "[ 6001.000001] NVRM: Xid (PCI:0000:10:1d): 119, pid=2231, name=nvidia-smi, Timeout waiting for RPC from GSP!\n"
    )
    assert [(event.code, event.pci) for event in parse_xids(log)] == [(79, "0000:03:00"), (119, "0000:10:1d")]


def test_pci_ids_of_nvidia_smi_and_kernel_match() -> None:
    assert pci_key("00000000:A0:1C.0") == pci_key("0000:a0:1c") == (0, 0xA0, 0x1C)
    assert pci_key("not-a-bus-id") is None


def test_unreadable_kernel_log_is_a_warning() -> None:
    report = evaluate(SmiResult(0, HEALTHY_GPU), None, 1)
    assert report.healthy
    assert report.warnings == ["kernel log could not be read: Xid check skipped"]


# ---------------------------------------------------------------------------------------------
# nvidia-smi rows
# ---------------------------------------------------------------------------------------------


def test_ecc_not_supported_is_not_an_error() -> None:
    table = parse_smi_csv("0, Tesla T4, 00000000:00:1E.0, Enabled, [N/A], 40\n")
    assert table.gpus[0].ecc_uncorrected_volatile is None
    assert evaluate(SmiResult(0, "0, Tesla T4, 00000000:00:1E.0, Enabled, [N/A], 40\n"), "", 1).healthy


def test_hot_gpu_is_a_warning_not_a_failure() -> None:
    report = evaluate(SmiResult(0, "0, NVIDIA A10G, 00000000:00:1E.0, Enabled, 0, 91\n"), "", 1)
    assert report.healthy
    assert report.warnings == ["GPU 0 (00000000:00:1E.0) is at 91 C"]


# ---------------------------------------------------------------------------------------------
# DCGM level 1
# ---------------------------------------------------------------------------------------------


def dcgm_fixture(name: str) -> str:
    return (FIXTURES / "dcgm" / name).read_text()


def test_dcgm_pass() -> None:
    outcome = parse_dcgm_json(dcgm_fixture("diag-r1-pass.json"))
    assert outcome.passed
    assert decide("p4d_healthy", dcgm=outcome).healthy


def test_dcgm_3_failure_names_the_test_and_gpu() -> None:
    report = decide("p4d_healthy", dcgm=parse_dcgm_json(dcgm_fixture("diag-r1-fail.json")))
    assert report.reasons == [
        "DCGM diag level 1: Page Retirement/Row Remap: GPU 3: GPU 3 had uncorrectable memory errors and row "
        "remapping failed. Drain the GPU and reset it or reboot the node."
    ]


def test_dcgm_4_failure_is_read_from_the_per_gpu_results() -> None:
    outcome = parse_dcgm_json(dcgm_fixture("diag-r1-v4-fail.json"))
    assert outcome.failures == ["software: GPU 6: Detected XID 79 for GPU 6."]


def test_dcgm_that_cannot_run_is_a_warning_unless_required() -> None:
    outcome = parse_dcgm_json(dcgm_fixture("host-engine-down.txt"))
    assert outcome.error is not None
    assert "Unable to connect to host engine" not in outcome.error  # first line only
    assert "unable to establish a connection" in outcome.error
    lenient = decide("p4d_healthy", dcgm=outcome)
    assert lenient.healthy
    assert lenient.warnings == [outcome.error]
    strict = decide("p4d_healthy", dcgm=outcome, dcgm_required=True)
    assert strict.reasons == [outcome.error]


def test_dcgm_runtime_error() -> None:
    outcome = parse_dcgm_json('{"runtime_error": "The GPU list is empty"}')
    assert outcome == DcgmOutcome(error="dcgmi diag did not run: The GPU list is empty")


# ---------------------------------------------------------------------------------------------
# Actions, against moto
# ---------------------------------------------------------------------------------------------


def published_values(asg_name: str) -> list[float]:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    dimension = {"Name": "AutoScalingGroupName", "Value": asg_name}
    metrics = cloudwatch.list_metrics(Namespace=NAMESPACE, MetricName=METRIC_NAME, Dimensions=[dimension])["Metrics"]
    if not metrics:
        return []
    assert metrics[0]["Dimensions"] == [dimension]  # the only dimension: alarms are per fleet
    now = datetime.now(UTC)
    data = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "failed",
                "MetricStat": {"Metric": metrics[0], "Period": 60, "Stat": "Maximum"},
            }
        ],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=5),
    )
    return data["MetricDataResults"][0]["Values"]


def test_unhealthy_marks_the_instance_unhealthy_and_publishes_1(fleet: Fleet) -> None:
    assert health_of(fleet.instance_id) == "HEALTHY"
    report = decide("p4d_xid79")

    errors = gpu_health.apply_actions(
        report,
        NodeIdentity(fleet.instance_id, REGION, fleet.asg_name),
        namespace=NAMESPACE,
        publish=True,
        set_health=True,
    )

    assert errors == []
    assert health_of(fleet.instance_id) == "UNHEALTHY"
    assert published_values(fleet.asg_name) == [1.0]


def test_healthy_publishes_0_and_leaves_the_instance_alone(fleet: Fleet) -> None:
    errors = gpu_health.apply_actions(
        decide("p4d_healthy"),
        NodeIdentity(fleet.instance_id, REGION, fleet.asg_name),
        namespace=NAMESPACE,
        publish=True,
        set_health=True,
    )
    assert errors == []
    assert health_of(fleet.instance_id) == "HEALTHY"
    assert published_values(fleet.asg_name) == [0.0]


def test_no_asg_name_skips_the_actions(fleet: Fleet) -> None:
    errors = gpu_health.apply_actions(
        decide("p4d_xid79"),
        NodeIdentity(fleet.instance_id, REGION, None),
        namespace=NAMESPACE,
        publish=True,
        set_health=True,
    )
    assert len(errors) == 1
    assert health_of(fleet.instance_id) == "HEALTHY"
    assert published_values(fleet.asg_name) == []


def test_once_with_identity_from_imds_marks_unhealthy_and_exits_1(fleet: Fleet) -> None:
    with FakeImds() as imds:
        imds.set("/latest/meta-data/instance-id", fleet.instance_id)
        imds.set("/latest/meta-data/placement/region", REGION)
        imds.set("/latest/meta-data/tags/instance/aws:autoscaling:groupName", fleet.asg_name)
        code = gpu_health.main(["--once", "--imds-url", imds.url, *replay_args("p4d_ecc_error")])

    assert code == 1
    assert health_of(fleet.instance_id) == "UNHEALTHY"
    assert published_values(fleet.asg_name) == [1.0]


def test_once_healthy_exits_0(fleet: Fleet) -> None:
    args = ["--once", "--instance-id", fleet.instance_id, "--region", REGION, "--asg-name", fleet.asg_name]
    assert gpu_health.main([*args, *replay_args("p4d_healthy")]) == 0
    assert published_values(fleet.asg_name) == [0.0]


def test_flags_turn_the_actions_off(fleet: Fleet) -> None:
    args = ["--once", "--no-metric", "--no-set-health", "--imds-url", "http://127.0.0.1:9"]
    assert gpu_health.main([*args, *replay_args("driver_not_loaded")]) == 1
    assert health_of(fleet.instance_id) == "HEALTHY"
    assert published_values(fleet.asg_name) == []


def test_identity_flags_win_over_imds() -> None:
    args = argparse.Namespace(instance_id="i-0abc", region="eu-west-1", asg_name="asg", imds_url="http://127.0.0.1:9")
    assert health_act.resolve_identity(args) == NodeIdentity("i-0abc", "eu-west-1", "asg")


def test_identity_without_the_asg_tag(caplog: pytest.LogCaptureFixture) -> None:
    with FakeImds() as imds:
        imds.set("/latest/meta-data/instance-id", "i-0abc")
        imds.set("/latest/meta-data/placement/region", REGION)
        args = argparse.Namespace(instance_id=None, region=None, asg_name=None, imds_url=imds.url)
        assert health_act.resolve_identity(args) == NodeIdentity("i-0abc", REGION, None)


# ---------------------------------------------------------------------------------------------
# Running the tools
# ---------------------------------------------------------------------------------------------


def test_a_missing_tool_is_reported_as_not_found() -> None:
    result = health_probe.run_command(["/nonexistent/nvidia-smi"], timeout_s=5)
    assert result.not_found


def test_a_tool_that_hangs_is_killed_at_the_timeout() -> None:
    result = health_probe.run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert result.timed_out
    assert evaluate(result, "", 8, smi_timeout_s=0.5).reasons == [
        "nvidia-smi did not answer within 0.5 s: the NVIDIA driver is hung"
    ]


def test_node_running_metric_counts_nodes_per_market() -> None:
    """With the market known, each check also reports one node of that market for the dashboard."""
    calls: list[dict] = []

    class FakeCloudWatch:
        def put_metric_data(self, **kwargs: object) -> None:
            calls.append(kwargs)

    health_act.publish_metric(FakeCloudWatch(), "GpuPlatform/dev", "gpu-platform-dev-inference", False, "spot")
    (call,) = calls
    assert call["Namespace"] == "GpuPlatform/dev"
    health, running = call["MetricData"]
    assert (health["MetricName"], health["Value"]) == ("GpuHealthCheckFailed", 0.0)
    assert running["MetricName"] == "NodeRunning" and running["Value"] == 1.0
    assert running["Dimensions"] == [
        {"Name": "AutoScalingGroupName", "Value": "gpu-platform-dev-inference"},
        {"Name": "Market", "Value": "spot"},
    ]
    calls.clear()
    health_act.publish_metric(FakeCloudWatch(), "GpuPlatform/dev", "gpu-platform-dev-inference", True)
    assert [d["MetricName"] for d in calls[0]["MetricData"]] == ["GpuHealthCheckFailed"]
