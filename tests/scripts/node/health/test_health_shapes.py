"""Every shape the health check reads, written by the project from NVIDIA's documented formats: each
kernel-log line shape of an Xid, MIG lines, DCGM 3 and 4 ``dcgmi diag -j`` (Pass, Skip, Warn, Fail,
errors nested in results and in the diagnostic object), nvidia-smi cells, ``fi_info -p efa``, and the
Xid table itself."""

from __future__ import annotations

import json

import pytest

from tests.scripts.node.helpers import NODE_DIR

# isort: split
from health.dcgm import parse_dcgm_json
from health.decide import evaluate
from health.efa import EfaInput, efa_reasons, find_ofi_nccl, parse_fi_info
from health.parse import SmiResult, parse_smi_csv, parse_xids
from health.xids import DECISION_BY_RESOLUTION, XidCatalogError, load_catalog, read_catalog

XID = "NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT"
LINE_SHAPES = {
    "dmesg -T": f"[Fri Aug 30 11:43:14 2024] {XID}",
    "dmesg --ctime": f"[Fri Aug 30 11:43:14 2024] {XID}",
    "dmesg --time-format iso": f"2024-08-30T11:43:14,470068+00:00 {XID}",
    "dmesg --decode": f"kern  :warn  : 2024-08-30T11:43:14,470068+00:00 {XID}",
    "dmesg (monotonic)": f"[12345.678901] {XID}",
    "syslog": f"Aug 30 11:43:14 ip-10-0-1-5 kernel: [  219.470000] {XID}",
    "journalctl -k -o short-iso": f"2024-08-30T11:43:14+0000 ip-10-0-1-5 kernel: {XID}",
    "bare": XID,
}
ROWS = "".join(
    f"{i}, NVIDIA H100 80GB HBM3, 00000000:{bus}:00.0, Enabled, 0, 30\n"
    for i, bus in enumerate(["18", "2A", "3A", "5D", "9A", "AB", "CB", "DB"])
)


@pytest.mark.parametrize("shape", sorted(LINE_SHAPES))
def test_each_kernel_log_shape_gives_the_same_xid_and_reason(shape: str) -> None:
    (event,) = parse_xids(LINE_SHAPES[shape] + "\n")
    assert (event.code, event.pci, event.gpu_instance) == (109, "0000:cb:00", None)
    report = evaluate(SmiResult(0, ROWS), LINE_SHAPES[shape] + "\n", 8)
    assert report.reason_classes == ["xid-109"]
    assert report.reasons[0].startswith("Xid 109 on GPU 6 (PCI 0000:cb:00): Context Switch Timeout Error")


def test_mig_lines_name_the_gpu_instance() -> None:
    log = (
        "[ 219.47] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=2211, name=python3, Ch 00000010\n"
        "[ 219.48] NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 95, pid=2211, name=python3, Ch 00000010\n"
    )
    first, second = parse_xids(log)
    assert (first.gpu_instance, first.compute_instance) == (5, None)
    assert (second.gpu_instance, second.compute_instance) == (5, 1)
    report = evaluate(SmiResult(0, "0, NVIDIA A100-SXM4-80GB, 00000000:01:00.0, Enabled, 0, 30\n"), log, 1)
    assert report.reasons[0].startswith("Xid 95 on GPU 0 (PCI 0000:01:00, MIG GPU-I 5): Uncontained memory error")
    assert report.warnings[0].startswith("Xid 94 on GPU 0 (PCI 0000:01:00, MIG GPU-I 5): Contained memory error")


@pytest.mark.parametrize(
    ("cell", "value"),
    [("[N/A]", None), ("[Not Supported]", None), ("Disabled", None), ("[Unknown Error]", None), ("3", 3)],
)
def test_nvidia_smi_cells(cell: str, value: int | None) -> None:
    (gpu,) = parse_smi_csv(f"0, NVIDIA L4, 00000000:35:00.0, Disabled, {cell}, {cell}\n").gpus
    assert gpu.ecc_uncorrected_volatile == value and gpu.temperature_c == value
    assert gpu.persistence_mode == "Disabled"


# ---------------------------------------------------------------------------------------------
# DCGM 3 and 4
# ---------------------------------------------------------------------------------------------

DCGM3 = {
    "DCGM GPU Diagnostic": {
        "test_categories": [
            {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]},
            {
                "category": "Hardware",
                "tests": [
                    {
                        "name": "GPU Memory",
                        "results": [
                            {"gpu_id": "0", "status": "Pass"},
                            {
                                "gpu_id": "1",
                                "status": "Warn",
                                "warnings": [{"warning": "Memory bandwidth low", "error_id": 27}],
                            },
                        ],
                    }
                ],
            },
            {"category": "Integration", "tests": [{"name": "PCIe", "results": [{"gpu_id": "0", "status": "Skip"}]}]},
        ],
        "version": "3.3.7",
    }
}
DCGM4 = {
    "version": "4.2.3",
    "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [{"entity_id": 0}, {"entity_id": 1}]}],
    "tests": [
        {
            "name": "memory",
            "test_summary": {"status": "Fail"},
            "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {
                    "entity_group": "GPU",
                    "entity_group_id": 1,
                    "entity_id": 1,
                    "status": "Fail",
                    "errors": [
                        {"category": 4, "error_id": 43, "msg": "Memory test found 12 bad addresses", "severity": 2}
                    ],
                },
            ],
        },
        {
            "name": "pcie",
            "test_summary": {"status": "Skip"},
            "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Skip"}],
        },
        {
            "name": "software",
            "test_summary": {"status": "Warn"},
            "results": [
                {
                    "entity_group": "GPU",
                    "entity_id": 0,
                    "status": "Warn",
                    "warnings": [{"msg": "Persistence mode is off"}],
                }
            ],
        },
    ],
}


def test_dcgm_3_pass_skip_and_warn_pass_with_warnings() -> None:
    outcome = parse_dcgm_json(json.dumps(DCGM3), level=2)
    assert outcome.passed and outcome.failures == []
    assert [r.status for r in outcome.results] == ["pass", "pass", "warn", "skip"]
    report = evaluate(SmiResult(0, ROWS), "", 8, outcome)
    assert report.healthy
    assert report.warnings == ["DCGM diag level 2: GPU Memory: GPU 1: Memory bandwidth low"]


def test_dcgm_4_failure_per_gpu_with_its_nested_error() -> None:
    outcome = parse_dcgm_json(json.dumps(DCGM4), level=3)
    assert outcome.failures == ["memory: GPU 1: Memory test found 12 bad addresses"]
    assert outcome.warnings == ["software: GPU 0: Persistence mode is off"]
    report = evaluate(SmiResult(0, ROWS), "", 8, outcome)
    assert report.reasons == ["DCGM diag level 3: memory: GPU 1: Memory test found 12 bad addresses"]
    assert report.reason_classes == ["dcgm-memory"]


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ({"DCGM GPU Diagnostic": {"runtime_error": "Unable to create GPU group"}}, "Unable to create GPU group"),
        (
            {"DCGM Diagnostic": {"runtime_error": "Couldn't find the GPU list", "test_categories": []}},
            "Couldn't find the GPU list",
        ),
        ({"runtime_error": "The GPU list is empty"}, "The GPU list is empty"),
        ({"version": "4.2.3", "errors": [{"msg": "No GPUs found", "error_id": 7}]}, "No GPUs found"),
        (
            {"DCGM Diagnostic": {"errors": [{"msg": "nvvs exited: permission denied"}]}},
            "nvvs exited: permission denied",
        ),
    ],
)
def test_dcgm_that_did_not_run_says_so_wherever_dcgm_nests_it(document: dict[str, object], why: str) -> None:
    outcome = parse_dcgm_json(json.dumps(document))
    assert outcome.error == f"dcgmi diag did not run: {why}"
    assert not outcome.passed
    assert not evaluate(SmiResult(0, ROWS), "", 8, outcome, dcgm_required=True).healthy
    assert evaluate(SmiResult(0, ROWS), "", 8, outcome).warnings == [outcome.error]


def test_a_dcgm_document_with_no_result_or_only_skips_did_not_run() -> None:
    assert parse_dcgm_json(json.dumps({"DCGM GPU Diagnostic": {"test_categories": []}})).error == (
        "dcgmi diag reported no test result: the diagnostic did not run"
    )
    skipped = {"tests": [{"name": "pcie", "results": [{"entity_id": 0, "status": "Skip"}]}]}
    assert parse_dcgm_json(json.dumps(skipped)).error == "dcgmi diag skipped every test: the diagnostic did not run"


# ---------------------------------------------------------------------------------------------
# fi_info -p efa and the OFI NCCL plugin
# ---------------------------------------------------------------------------------------------


def fi_info(devices: int, provider: str = "efa") -> str:
    return "".join(
        f"provider: {provider}\n    fabric: {provider}\n    domain: rdmap{16 + i}s27-{kind}\n    version: 122.0\n"
        for i in range(devices)
        for kind in ("rdm", "dgrm")
    )


def efa(text: str, rc: int = 0, plugin: str | None = "/opt/amazon/ofi-nccl/lib/libnccl-net.so") -> EfaInput:
    return EfaInput(4, rc, parse_fi_info(text), "", plugin)


def test_efa_devices_are_counted_once_per_device_whatever_its_endpoints() -> None:
    assert parse_fi_info(fi_info(4)).devices == {"rdmap16s27", "rdmap17s27", "rdmap18s27", "rdmap19s27"}
    assert efa_reasons(efa(fi_info(4))) == []


def test_efa_shortfalls_each_have_their_reason() -> None:
    assert efa_reasons(efa(fi_info(3)))[0].startswith("EFA: fi_info -p efa lists 3 EFA devices")
    assert efa_reasons(efa(fi_info(4, provider="tcp")))[0].startswith("EFA: libfabric lists no efa provider")
    assert efa_reasons(efa("", rc=1))[0].startswith("EFA: fi_info -p efa failed (no output)")
    assert efa_reasons(efa(fi_info(4), plugin=None))[0].startswith("EFA: NCCL's OFI plugin (libnccl-net*.so*)")


def test_the_ofi_plugin_is_found_where_the_efa_installer_puts_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lib = tmp_path / "opt" / "amazon" / "ofi-nccl" / "lib"
    lib.mkdir(parents=True)
    assert find_ofi_nccl([str(lib)]) is None
    (lib / "libnccl-net-ofi.so").write_text("")
    assert find_ofi_nccl([str(tmp_path / "none"), str(lib)]) == str(lib / "libnccl-net-ofi.so")


# ---------------------------------------------------------------------------------------------
# The Xid table
# ---------------------------------------------------------------------------------------------


def test_the_table_names_its_source_and_follows_the_resolution_unless_it_says_why() -> None:
    text = (NODE_DIR / "health" / "xid_catalog.csv").read_text()
    assert "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in text
    assert "read 2026-11-24" in text
    catalog = load_catalog()
    for entry in catalog.values():
        if DECISION_BY_RESOLUTION.get(entry.resolution) != entry.decision:
            assert entry.why, entry
    # the codes the platform once kept fatal against the catalog now follow it
    assert {catalog[code].decision for code in (63, 92, 94)} == {"warning"}
    assert catalog[109].decision == "unhealthy" and catalog[154].decision == "recovery-action"


def test_a_broken_table_is_one_line_naming_the_fix(tmp_path) -> None:  # type: ignore[no-untyped-def]
    header = "code,mnemonic,name,nvidia_action,resolution,decision,why\n"
    bad = tmp_path / "xid.csv"
    bad.write_text(header + "63,INFOROM_DRAM_RETIREMENT_EVENT,GPU memory remapping event,IGNORE,ignore,unhealthy,\n")
    with pytest.raises(XidCatalogError, match="decision unhealthy departs from ignore; fix: say why"):
        read_catalog(bad)
