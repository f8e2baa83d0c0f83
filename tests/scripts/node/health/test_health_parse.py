"""health.parse: tool output to facts, on the cell and line shapes the tools print (pure, no I/O)."""

from __future__ import annotations

import json

import pytest

import tests.scripts.node.helpers  # noqa: F401 - puts scripts/node on sys.path

# isort: split
from health.dcgm import parse_dcgm_json
from health.parse import (
    NVIDIA_SMI_FIELDS,
    GpuRow,
    XidEvent,
    first_line,
    parse_fabric_states,
    parse_smi_csv,
    parse_xids,
)

# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu CSV
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ecc", "temperature", "expected"),
    [
        ("0", "31", (0, 31)),
        ("[N/A]", "31", (None, 31)),
        ("[Not Supported]", "[Not Supported]", (None, None)),
        ("[Unknown Error]", "[Unknown Error]", (None, None)),
        ("Disabled", "45", (None, 45)),  # a word where a count belongs: no count, not an error
        ("3", "71.0", (3, 71)),
    ],
)
def test_number_cells_of_every_shape(ecc: str, temperature: str, expected: tuple[int | None, int | None]) -> None:
    (gpu,) = parse_smi_csv(f"0, NVIDIA H100 80GB HBM3, 00000000:53:00.0, Enabled, {ecc}, {temperature}\n").gpus
    assert (gpu.ecc_uncorrected_volatile, gpu.temperature_c) == expected


def test_rows_keep_their_fields_and_other_lines_are_kept_as_unparsed() -> None:
    text = (
        "\n"
        "0, NVIDIA A100-SXM4-40GB, 00000000:10:1C.0, Disabled, 0, 30\n"
        "Unable to determine the device handle for GPU0000:20:1D.0: Unknown Error\n"
        "1, NVIDIA A100-SXM4-40GB, 00000000:10:1D.0, Enabled, 0\n"  # a column short
        "   \n"
    )
    table = parse_smi_csv(text)
    assert table.gpus == [GpuRow(0, "NVIDIA A100-SXM4-40GB", "00000000:10:1C.0", "Disabled", 0, 30)]
    assert table.unparsed == [
        "Unable to determine the device handle for GPU0000:20:1D.0: Unknown Error",
        "1, NVIDIA A100-SXM4-40GB, 00000000:10:1D.0, Enabled, 0",
    ]


def test_the_columns_asked_for_are_the_columns_read() -> None:
    row = ", ".join(["2", "NVIDIA L4", "00000000:38:00.0", "Enabled", "0", "50"])
    assert len(NVIDIA_SMI_FIELDS) == 6
    (gpu,) = parse_smi_csv(row).gpus
    assert (gpu.index, gpu.name, gpu.bus_id, gpu.persistence_mode) == (2, "NVIDIA L4", "00000000:38:00.0", "Enabled")


# ---------------------------------------------------------------------------------------------
# NVRM Xid lines
# ---------------------------------------------------------------------------------------------


def test_xid_lines_under_the_kernel_log_prefixes_the_check_reads() -> None:
    log = (
        "2024-05-02T10:11:12+0000 ip-10-0-1-5 kernel: NVRM: Xid (PCI:0000:53:00): 119, pid=9, name=nvidia-smi, "
        "Timeout waiting for RPC from GSP!\n"  # journalctl -k -o short-iso
        "2024-05-02T10:11:13,123456+00:00 NVRM: Xid (PCI:0000:64:00): 13, pid=7, name=python3, Graphics Exception\n"
        "[Thu May  2 10:11:14 2024] NVRM: Xid (PCI:0000:A0:1C): 79, GPU has fallen off the bus.\n"  # dmesg -T
        "[  219.470000] NVRM: GPU at PCI:0000:a0:1c: GPU-0b6a0f1e\n"  # not an Xid line
    )
    assert parse_xids(log) == [
        XidEvent(119, "0000:53:00", "pid=9, name=nvidia-smi, Timeout waiting for RPC from GSP!"),
        XidEvent(13, "0000:64:00", "pid=7, name=python3, Graphics Exception"),
        XidEvent(79, "0000:a0:1c", "GPU has fallen off the bus."),  # the address in lower case, as a key
    ]


def test_an_xid_line_without_detail() -> None:
    assert parse_xids("NVRM: Xid (PCI:00000000:10:1c.0): 48\n") == [XidEvent(48, "00000000:10:1c.0", "")]


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q Fabric sections
# ---------------------------------------------------------------------------------------------

QUERY = """
==============NVSMI LOG==============

Attached GPUs                             : 2
GPU 00000000:53:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    GPU Reset Status
        State                             : No Reset Required
        Status                            : Pending
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
    Processes                             : None

GPU 00000000:64:00.0
    Fabric
        State                             : In Progress
        Status                            : N/A
"""


def test_fabric_states_come_from_the_fabric_section_only() -> None:
    assert parse_fabric_states(QUERY) == {
        "00000000:53:00.0": ("Completed", "Success"),
        "00000000:64:00.0": ("In Progress", "N/A"),
    }


def test_a_fabric_section_without_status_is_not_reported() -> None:
    assert parse_fabric_states("GPU 00000000:53:00.0\n    Fabric\n        State : Completed\n") == {}


# ---------------------------------------------------------------------------------------------
# dcgmi diag -j
# ---------------------------------------------------------------------------------------------


def test_dcgm_output_that_is_not_json_names_its_first_line() -> None:
    assert parse_dcgm_json("").error == "dcgmi diag output is not JSON (Expecting value): no output"
    outcome = parse_dcgm_json("\nError: unable to establish a connection to the specified host: localhost\n")
    assert outcome.error is not None and outcome.error.endswith(
        ": Error: unable to establish a connection to the specified host: localhost"
    )
    assert not outcome.passed


def test_dcgm_skip_and_warn_are_not_failures() -> None:
    document = {
        "tests": [
            {"name": "memory", "results": [{"entity_id": 0, "status": "Skip"}, {"entity_id": 1, "status": "Warn"}]},
            {"name": "pcie", "test_summary": {"status": "Pass"}, "results": [{"entity_id": 0, "status": "Pass"}]},
        ]
    }
    outcome = parse_dcgm_json(json.dumps(document))
    assert outcome.passed and outcome.failures == []
    assert outcome.warnings == ["memory: GPU 1: warn"]


def test_dcgm_summary_decides_when_no_result_names_the_failure() -> None:
    document = {"tests": [{"name": "memory", "test_summary": {"status": "Fail"}, "results": []}]}
    assert parse_dcgm_json(json.dumps(document)).failures == ["memory: fail"]


def test_dcgm_failure_messages_in_each_shape_and_each_failure_once() -> None:
    failing = {
        "status": "Fail",
        "gpu_ids": "0,1",
        "warnings": [{"warning": "Xid 48 seen", "error_id": 43}, "clocks throttled"],
        "errors": "row remap failed",
        "info": [{"msg": "see dmesg"}],
    }
    document = {"tests": [{"name": "Diagnostic", "results": [failing, dict(failing)]}]}
    assert parse_dcgm_json(json.dumps(document)).failures == [
        "Diagnostic: GPU 0,1: row remap failed; Xid 48 seen; clocks throttled"
    ]


def test_a_dcgm_document_that_is_not_an_object_did_not_run() -> None:
    document = [{"name": "pcie", "results": [{"entity_id": 3, "status": "FAIL"}]}]
    assert parse_dcgm_json(json.dumps(document)).error == "dcgmi diag output is not a JSON object"


def test_first_line_skips_blank_lines() -> None:
    assert first_line("\n  \n  NVIDIA-SMI has failed  \nsecond\n") == "NVIDIA-SMI has failed"
    assert first_line("") == ""
