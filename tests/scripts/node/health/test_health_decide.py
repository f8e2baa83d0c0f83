"""health.decide and health.xids: facts to verdict, on the inputs the other tests leave thin (pure)."""

from __future__ import annotations

import pytest

from tests.scripts.node.helpers import FIXTURES

# isort: split
from health.dcgm import DcgmOutcome, DcgmResult
from health.decide import HOT_GPU_C, FabricInput, HealthReport, evaluate, fabric_reasons
from health.parse import SmiResult, parse_smi_csv
from health.xids import FATAL_XIDS, parse_extra_xids, xid_verdict

H100 = "0, NVIDIA H100 80GB HBM3, 00000000:53:00.0, Enabled, 0, 30\n"
P5_ROWS = (FIXTURES / "p5_fabric" / "nvidia-smi.out").read_text()
P5_QUERY = (FIXTURES / "p5_fabric" / "nvidia-smi-q.out").read_text()


def xid_line(pci: str, code: int, detail: str) -> str:
    return f"[ 100.000001] NVRM: Xid (PCI:{pci}): {code}, {detail}\n"


# ---------------------------------------------------------------------------------------------
# The Xid policy
# ---------------------------------------------------------------------------------------------


def test_an_nvlink5_xid_quotes_the_fatal_line_among_non_fatal_ones() -> None:
    details = [
        "RLW_REMAP  Non-fatal  XC0 i0 Link 03 (0x00000001 0x00000000)",
        "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000)",
    ]
    assert xid_verdict(149, details) == (
        "NVLink5 error the driver reports as Fatal: NVIDIA's resolution is a GPU reset",
        details[1],
    )
    assert xid_verdict(149, details[:1]) == (None, details[0])


def test_recovery_action_without_a_name_is_named_by_its_code() -> None:
    line = "GPU recovery action changed from 0x0 to 0x2"
    meaning, quoted = xid_verdict(154, [line])
    assert meaning == "the GPU's recovery action is now 0x2: it needs that before the next job"
    assert quoted == line


def test_a_fleet_adds_codes_to_the_table_and_cannot_remove_any() -> None:
    extra = parse_extra_xids(" 63, 13 ,,")
    assert extra == {
        63: "GPU memory remapping event made unhealthy by the fleet's health.extra_fatal_xids",
        13: "Graphics Engine Exception made unhealthy by the fleet's health.extra_fatal_xids",
    }
    assert xid_verdict(63, ["Row Remapper"], extra)[0] == extra[63]
    assert xid_verdict(63, ["Row Remapper"]) == (None, "Row Remapper")
    assert xid_verdict(48, ["DBE"], extra) == (FATAL_XIDS[48], "DBE")  # the table's codes stay
    with pytest.raises(ValueError, match="'x9' is not an Xid code"):
        parse_extra_xids("63,x9")


def test_each_xid_on_each_gpu_is_one_line_and_an_unknown_address_names_no_gpu() -> None:
    log = (
        xid_line("0000:53:00", 48, "An uncorrectable double bit error")
        + xid_line("0000:53:00", 48, "An uncorrectable double bit error")
        + xid_line("0000:99:00", 48, "An uncorrectable double bit error")
    )
    report = evaluate(SmiResult(0, H100), log, 1)
    assert report.reasons == [
        f"Xid 48 on GPU 0 (PCI 0000:53:00) [x2]: {FATAL_XIDS[48]} (kernel: An uncorrectable double bit error)",
        f"Xid 48 on PCI 0000:99:00 (no GPU of nvidia-smi at that address): {FATAL_XIDS[48]} "
        "(kernel: An uncorrectable double bit error)",
    ]


# ---------------------------------------------------------------------------------------------
# nvidia-smi's own failure
# ---------------------------------------------------------------------------------------------


def test_a_failing_nvidia_smi_is_quoted_from_stderr_first() -> None:
    smi = SmiResult(returncode=15, stdout=H100, stderr="\nFailed to initialize NVML: Driver/library version mismatch\n")
    report = evaluate(smi, "", 1)
    assert report.reasons == ["nvidia-smi exited 15: Failed to initialize NVML: Driver/library version mismatch"]


def test_a_failing_nvidia_smi_that_still_lists_the_gpus_is_not_quoted_from_them() -> None:
    report = evaluate(SmiResult(returncode=3, stdout=H100), "", 1)
    assert report.reasons == ["nvidia-smi exited 3"]


# ---------------------------------------------------------------------------------------------
# The NVSwitch fabric
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "shown"),
    [("", "unknown"), ("activating\n", "activating"), ("failed", "failed")],
)
def test_ampere_fabric_manager_not_active(state: str, shown: str) -> None:
    reasons = fabric_reasons(FabricInput("p4d.24xlarge", service_state=state), [])
    assert reasons == [
        f"p4d.24xlarge has NVSwitches but nvidia-fabricmanager.service is {shown}: "
        "no NVLink between the GPUs until Fabric Manager runs"
    ]
    assert fabric_reasons(FabricInput("p4de.24xlarge", service_state="active\n"), []) == []


@pytest.mark.parametrize(
    "query",
    [
        None,
        SmiResult(returncode=None, stdout="", timed_out=True),
        SmiResult(returncode=None, stdout="", not_found=True),
        SmiResult(returncode=9, stdout=P5_QUERY),
    ],
)
def test_hopper_fabric_state_that_could_not_be_read_is_a_failure(query: SmiResult | None) -> None:
    assert fabric_reasons(FabricInput("p5en.48xlarge", smi_query=query), []) == [
        "p5en.48xlarge has NVSwitches but nvidia-smi -q did not report the GPUs' fabric state"
    ]


def test_hopper_query_without_a_fabric_section_is_a_failure() -> None:
    query = SmiResult(0, "GPU 00000000:53:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n")
    assert fabric_reasons(FabricInput("p5.48xlarge", smi_query=query), []) == [
        "p5.48xlarge has NVSwitches but nvidia-smi -q lists no Fabric section"
    ]


def test_hopper_fabric_not_ready_names_the_gpu_by_index() -> None:
    gpus = parse_smi_csv(P5_ROWS).gpus
    registering = P5_QUERY.replace("Success", "Failure", 1)
    (reason,) = fabric_reasons(FabricInput("p5.48xlarge", smi_query=SmiResult(0, registering)), gpus)
    assert reason.startswith(f"NVSwitch fabric not ready on GPU 0 ({gpus[0].bus_id}): State Completed, Status Failure")
    assert evaluate(
        SmiResult(0, P5_ROWS), "", 8, fabric=FabricInput("p5.48xlarge", smi_query=SmiResult(0, P5_QUERY))
    ).healthy


def test_types_without_nvswitch_are_not_judged_on_a_fabric() -> None:
    assert fabric_reasons(FabricInput("g6e.48xlarge", smi_query=None, service_state=None), []) == []


# ---------------------------------------------------------------------------------------------
# Warnings that are not failures, and DCGM
# ---------------------------------------------------------------------------------------------


def test_hot_means_above_the_threshold() -> None:
    at = f"0, NVIDIA A10G, 00000000:00:1E.0, Enabled, 0, {HOT_GPU_C}\n"
    unknown = "0, NVIDIA A10G, 00000000:00:1E.0, Enabled, 0, [N/A]\n"
    assert evaluate(SmiResult(0, at), "", 1) == HealthReport(healthy=True)
    assert evaluate(SmiResult(0, unknown), "", 1) == HealthReport(healthy=True)


def test_dcgm_failures_fail_and_its_error_follows_required() -> None:
    outcome = DcgmOutcome(
        [DcgmResult("memory", "0", "fail")], error="dcgmi diag -r 2 did not finish within 600 s", level=2
    )
    lenient = evaluate(SmiResult(0, H100), "", 1, outcome)
    assert lenient.reasons == ["DCGM diag level 2: memory: GPU 0: fail"]
    assert lenient.reason_classes == ["dcgm-memory"]
    assert lenient.warnings == ["dcgmi diag -r 2 did not finish within 600 s"]
    strict = evaluate(SmiResult(0, H100), "", 1, outcome, dcgm_required=True)
    assert strict.reasons == [*lenient.reasons, *lenient.warnings]
    assert strict.reason_classes == ["dcgm-memory", "dcgm-not-run"]
    assert evaluate(SmiResult(0, H100), "", 1, DcgmOutcome([DcgmResult("memory", "0", "pass")])).healthy
