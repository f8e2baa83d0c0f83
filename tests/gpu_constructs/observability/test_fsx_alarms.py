"""FsxAlarms: free capacity in bytes from the configured percentage (missing data alarms), throughput as a
percentage of the file system's own MB/s."""

from __future__ import annotations

from aws_cdk import aws_sns as sns

from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.fsx_alarms import GIB, FsxAlarms
from tests.gpu_constructs.helpers import ALARMS, bare_stack, template


def test_thresholds_follow_the_file_systems_size_and_throughput() -> None:
    stack = bare_stack()
    factory = AlarmFactory(prefix="gpu-platform-dev", topic=sns.Topic(stack, "Topic"))
    FsxAlarms(stack, "Fsx", file_system_id="fs-0123", storage_capacity_gib=2400, throughput_mb_per_s=600,
              thresholds=ALARMS, factory=factory)  # fmt: skip
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in template(stack).find_resources("AWS::CloudWatch::Alarm").values()
    }
    free = alarms["gpu-platform-dev-fsx-free-capacity-low"]
    assert free["Threshold"] == 2400 * GIB * ALARMS.fsx_free_capacity_percent.threshold / 100
    assert free["TreatMissingData"] == "breaching"  # no datapoint from a file system is not "fine"
    assert free["Dimensions"] == [{"Name": "FileSystemId", "Value": "fs-0123"}]
    busy = alarms["gpu-platform-dev-fsx-throughput-saturated"]
    (expression,) = [m["Expression"] for m in busy["Metrics"] if "Expression" in m]
    assert expression == "100 * (r + w) / PERIOD(r) / 600000000"
    assert busy["Threshold"] == ALARMS.fsx_throughput_percent.threshold
