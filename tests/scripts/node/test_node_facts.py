"""node_facts.py: the identity bootstrap.sh reads from IMDS and the instance-type facts it reads
from the user data's instance-types.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts.node.helpers import FakeImds

# isort: split
import node_facts
from node_facts import FactError, InstanceTypeFacts, parse_instance_type

TYPES = {
    "p4d.24xlarge": {"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": True},
    "g5.xlarge": {"gpus": 1, "efa_interfaces": 0, "gpudirect_rdma": False, "gpu_model": "NVIDIA A10G"},
}


def test_identity_prints_id_and_type(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeImds() as imds:
        imds.set("/latest/meta-data/instance-id", "i-0123456789abcdef0")
        imds.set("/latest/meta-data/instance-type", "p5.48xlarge")
        assert node_facts.main(["identity", "--imds-url", imds.url]) == 0
    assert capsys.readouterr().out == "INSTANCE_ID=i-0123456789abcdef0\nINSTANCE_TYPE=p5.48xlarge\n"


def test_identity_without_imds_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeImds() as imds:  # nothing set: 404
        assert node_facts.main(["identity", "--imds-url", imds.url]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "node-facts: IMDS has no /latest/meta-data/instance-id\n"


def test_identity_refuses_a_value_a_shell_should_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeImds() as imds:
        imds.set("/latest/meta-data/instance-id", "i-0123456789abcdef0")
        imds.set("/latest/meta-data/instance-type", "p4d.24xlarge\nEXPECTED_GPUS=1")
        assert node_facts.main(["identity", "--imds-url", imds.url]) == 1
    assert "is not an EC2 instance type" in capsys.readouterr().err


def test_instance_type_facts_from_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "instance-types.json"
    path.write_text(json.dumps(TYPES))
    assert node_facts.main(["instance-type", "--file", str(path), "--type", "p4d.24xlarge"]) == 0
    assert capsys.readouterr().out == "GPUS=8\nEFA_INTERFACES=4\nGPUDIRECT_RDMA=true\n"
    assert parse_instance_type(TYPES, "g5.xlarge", "f") == InstanceTypeFacts(1, 0, False)  # extra keys ignored


def test_a_type_missing_from_the_file_names_what_it_lists() -> None:
    with pytest.raises(FactError, match=r"f: instance type p3\.2xlarge is not listed \(it lists: g5\.xlarge, p4d"):
        parse_instance_type(TYPES, "p3.2xlarge", "f")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"gpus": 0, "efa_interfaces": 0, "gpudirect_rdma": False}, "gpus must be an integer >= 1, got 0"),
        ({"gpus": True, "efa_interfaces": 0, "gpudirect_rdma": False}, "gpus must be an integer >= 1, got True"),
        ({"gpus": 8, "efa_interfaces": "4", "gpudirect_rdma": True}, "efa_interfaces must be an integer >= 0"),
        ({"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": "true"}, "gpudirect_rdma must be true or false"),
        ({"gpus": 8}, "efa_interfaces must be an integer >= 0, got None; gpudirect_rdma"),
        ([8, 4, True], "expected an object, got list"),
    ],
)
def test_a_malformed_entry_says_which_field(entry: object, message: str) -> None:
    with pytest.raises(FactError, match=f"^f: x1.large: {message}".replace("(", r"\(").replace(")", r"\)")):
        parse_instance_type({"x1.large": entry}, "x1.large", "f")


def test_unreadable_or_broken_file_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert node_facts.main(["instance-type", "--file", str(missing), "--type", "p4d.24xlarge"]) == 1
    assert f"cannot read {missing}" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert node_facts.main(["instance-type", "--file", str(broken), "--type", "p4d.24xlarge"]) == 1
    assert "not JSON" in capsys.readouterr().err
    broken.write_text("[]")
    assert node_facts.main(["instance-type", "--file", str(broken), "--type", "p4d.24xlarge"]) == 1
    assert "expected a non-empty JSON object" in capsys.readouterr().err
