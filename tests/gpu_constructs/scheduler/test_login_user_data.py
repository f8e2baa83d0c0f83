"""The cluster's people on its nodes: the people file (config's slurm.teams and slurm.users) in the login nodes' and
the Slurm fleets' user data, the script and accounting unit on the login nodes (their role unchanged: nothing to
read in S3), and Session Manager's Run As on in the Slurm environment."""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config.slurm import URGENT_PRIORITY, URGENT_QOS
from gpu_constructs.fleet.render.user_data import USER_DATA_LIMIT_BYTES, packed
from gpu_constructs.scheduler.login_user_data import (
    ACCOUNTS_UNIT,
    PEOPLE_FILE,
    SLURM_PEOPLE_SCRIPT,
    accounts_unit,
    login_user_data,
    mime_size,
)
from tests.gpu_constructs.scheduler.helpers import ENV, by_path
from tests.synth import StackTemplate, Synth

PEOPLE = {
    "teams": [{"name": "vision", "shares": 60}, {"name": "nlp", "shares": 1}],
    "urgent_qos": {"name": URGENT_QOS, "priority": URGENT_PRIORITY},
    "users": [{"name": "alice", "team": "vision", "uid": 20001}, {"name": "bob", "team": "nlp", "uid": 20002}],
}


def shell_part(template: dict[str, Any]) -> str:
    """The literal text of the MIME archive's shell part (CDK base64-encodes it at deploy), its tokens left out."""
    parts = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    (inner,) = [p["Fn::Base64"] for p in parts if isinstance(p, dict) and "Fn::Base64" in p]
    return inner if isinstance(inner, str) else "".join(s for s in inner["Fn::Join"][1] if isinstance(s, str))


def heredoc(text: str, marker: str) -> str:
    """The body of the first ``<<'MARKER'`` heredoc in ``text``."""
    found = re.search(rf"<<'{marker}'[^\n]*\n(.*?)\n{marker}\n", text, re.S)
    assert found, f"no {marker} heredoc"
    return found.group(1)


def unpacked(text: str, marker: str) -> str:
    """What a ``packed`` heredoc writes: its base64 decoded, then gunzipped."""
    return gzip.decompress(base64.b64decode(heredoc(text, marker).replace("\n", ""))).decode()


def test_the_login_nodes_get_the_people_the_script_and_the_accounting_unit(fleets: StackTemplate) -> None:
    ((_, template),) = by_path(fleets, "AWS::EC2::LaunchTemplate", "/Slurm/Login/").items()
    text = shell_part(template)
    assert json.loads(unpacked(text, "PEOPLE")) == PEOPLE
    assert unpacked(text, "SLURM_PEOPLE") == SLURM_PEOPLE_SCRIPT.read_text()
    assert heredoc(text, "UNIT") == accounts_unit()
    assert mime_size(text.splitlines()) < USER_DATA_LIMIT_BYTES
    users = text.index(f"slurm_people.py users --people {PEOPLE_FILE}")
    assert users < text.index(f"systemctl enable --now --no-block {ACCOUNTS_UNIT}")


def test_the_slurm_fleets_nodes_add_the_same_users_before_the_bootstrap(fleets: StackTemplate) -> None:
    templates = by_path(fleets, "AWS::EC2::LaunchTemplate", "/Slurm/Fleet-")
    assert templates
    for template in templates.values():
        text = shell_part(template)
        assert json.loads(unpacked(text, "PEOPLE")) == PEOPLE
        users = text.index('python3 "$node/slurm_people.py" users --people "$etc/people.json"')
        assert text.index('python3 -m zipfile -e "$node.zip"') < users < text.index('exec "$node/bootstrap.sh"')


def test_the_login_role_still_reads_nothing_in_s3(slurm_synth: Synth) -> None:
    security = slurm_synth.stack(ENV, "Security")
    policies = by_path(security, "AWS::IAM::ManagedPolicy", "/SlurmLogin/")
    assert policies
    actions = {
        action
        for policy in policies.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert "pcs:RegisterComputeNodeGroupInstance" in actions
    assert not [a for a in actions if a.split(":")[0] in ("s3", "autoscaling", "cloudwatch", "ecr")]


def test_sessions_in_the_slurm_environment_run_as_the_callers_tag(slurm_synth: Synth) -> None:
    (doc,) = slurm_synth.stack(ENV, "Security").resources("AWS::SSM::Document").values()
    assert doc["Properties"]["Content"]["inputs"]["runAsEnabled"] is True


def test_without_accounting_the_login_nodes_add_the_users_only() -> None:
    lines = login_user_data(json.dumps(PEOPLE), accounting=False)
    assert not [line for line in lines if ACCOUNTS_UNIT in line]
    assert f"/usr/bin/python3 /opt/gpu-platform/node/slurm_people.py users --people {PEOPLE_FILE}" in lines


def test_a_packed_file_is_written_back_by_bash(tmp_path: Path) -> None:
    body = SLURM_PEOPLE_SCRIPT.read_text()
    target = tmp_path / "slurm_people.py"
    subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(packed(str(target), body, "X"))], check=True)
    assert target.read_text() == body


def test_more_people_than_the_user_data_holds_are_refused_in_one_line() -> None:
    users = [{"name": f"user{i:04d}", "uid": 20000 + i, "team": "vision"} for i in range(5000)]
    with pytest.raises(
        ValueError, match=r"^the Slurm login nodes' user data would be \d+ bytes, over EC2's 16384; fix:"
    ):
        login_user_data(json.dumps({**PEOPLE, "users": users}), accounting=True)
