"""JobDocument: the job document's parameters reach the job runner as exactly one argument each.

The flow runs the document's own step, read from the synthesized template, the way Run Command runs it:
each parameter (or its default) in the environment as ``SSM_<Name>`` (``interpolationType: ENV_VAR``),
the commands as one script under ``sh`` and ``bash``, with a stand-in ``python3`` on PATH that records
the argv and PYTHONPATH it was started with. A command full of shell syntax arrives as one string,
unrun; a value outside a parameter's pattern never gets that far (SendCommand refuses it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.fleet.job_document import RUNNER_OPTIONS, JobDocument
from gpu_constructs.fleet.render.user_data import INSTALL_PREFIX
from tests.gpu_constructs.helpers import bare_stack, only, template

NAME = "gpu-platform-dev-job"
PORT = 29500
RESTARTS = 5
#: The contract's patterns (the CLI and the runner hold values to the same ones).
PATTERNS = {
    "Action": "^(start|status|stop)$",
    "JobId": "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$",
    "Nodes": "^[1-9][0-9]{0,3}$",
    "ProcsPerNode": "^[1-9][0-9]{0,2}$",
    "RendezvousEndpoint": "^[0-9.]{7,15}:[0-9]{2,5}$",
    "WorkingDirectory": "^/fsx(/[A-Za-z0-9._-]+)*$",
    "MaxRestarts": "^[0-9]{1,3}$",
    "Command": "^[^\\r\\n]{0,4096}$",
}
SHELLS = [shell for shell in ("sh", "bash") if shutil.which(shell)]

#: Records its argv and PYTHONPATH as one JSON line, then exits 0 like the runner's ``start``.
FAKE_PYTHON = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "pythonpath": os.environ.get("PYTHONPATH")}}) + "\\n")
print(json.dumps({{"job": "stand-in"}}))
"""


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    JobDocument(stack, "Jobs", document_name=NAME, rendezvous_port=PORT, max_restarts=RESTARTS)
    return template(stack)


@pytest.fixture(scope="module")
def content(tmpl: Template) -> dict[str, Any]:
    _, document = only(tmpl, "AWS::SSM::Document")
    return document["Properties"]["Content"]


def test_a_named_command_document_updated_in_place(tmpl: Template) -> None:
    _, document = only(tmpl, "AWS::SSM::Document")
    props = document["Properties"]
    assert props["Name"] == NAME
    assert (props["DocumentType"], props["DocumentFormat"], props["TargetType"]) == (
        "Command",
        "JSON",
        "/AWS::EC2::Instance",
    )
    # A fixed name cannot be replaced: a content change becomes the document's new default version.
    assert props["UpdateMethod"] == "NewVersion"


def test_every_parameter_is_an_env_var_string_held_to_its_pattern(content: dict[str, Any]) -> None:
    assert content["schemaVersion"] == "2.2"
    parameters = content["parameters"]
    assert {name: p["allowedPattern"] for name, p in parameters.items()} == PATTERNS
    for name, parameter in parameters.items():
        assert (parameter["type"], parameter["interpolationType"]) == ("String", "ENV_VAR"), name
        if "default" in parameter:  # a default passes its own pattern, or SendCommand could never omit it
            assert re.fullmatch(parameter["allowedPattern"], parameter["default"]), name
    defaults = {name: p.get("default") for name, p in parameters.items()}
    assert defaults == {
        "Action": "start",
        "JobId": None,  # required
        "Nodes": "1",
        "ProcsPerNode": "1",
        "RendezvousEndpoint": f"127.0.0.1:{PORT}",
        "WorkingDirectory": "/fsx",
        "MaxRestarts": str(RESTARTS),
        "Command": "",
    }
    (step,) = content["mainSteps"]
    assert step["action"] == "aws:runShellScript"
    assert step["precondition"] == {"StringEquals": ["platformType", "Linux"]}
    # No parameter is ever pasted into the script text.
    assert "{{" not in json.dumps(step)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JobId", "train;rm"),
        ("JobId", "-rf"),
        ("JobId", "a" * 129),
        ("Nodes", "0"),
        ("Nodes", "2 3"),
        ("ProcsPerNode", "1000"),
        ("RendezvousEndpoint", "$(id):29400"),
        ("RendezvousEndpoint", "10.0.0.1"),
        ("WorkingDirectory", "/etc"),
        ("WorkingDirectory", "/fsx/a b"),
        ("WorkingDirectory", "/fsx/$HOME"),
        ("MaxRestarts", "-1"),
        ("Action", "restart"),
        ("Command", "python3 train.py\nrm -rf /"),
        ("Command", "x" * 4097),
    ],
)
def test_send_command_refuses_a_value_outside_the_pattern(content: dict[str, Any], name: str, value: str) -> None:
    assert not re.fullmatch(content["parameters"][name]["allowedPattern"], value)


def _sent(content: dict[str, Any], **parameters: str) -> dict[str, str]:
    """The step's environment as Run Command builds it: each parameter given, else its default."""
    for name, value in parameters.items():
        assert re.fullmatch(content["parameters"][name]["allowedPattern"], value), (name, value)
    values = {name: p["default"] for name, p in content["parameters"].items() if "default" in p}
    values.update(parameters)
    return {f"SSM_{name}": value for name, value in values.items()}


def _run_step(content: dict[str, Any], shell: str, tmp_path: Path, env: dict[str, str]) -> tuple[int, str, list]:
    """Run the document's commands as one script with ``shell``, a stand-in python3 first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON.format(python=shutil.which("python3")))
    fake.chmod(0o755)
    script = tmp_path / "_script.sh"
    (step,) = content["mainSteps"]
    script.write_text("\n".join(step["inputs"]["runCommand"]) + "\n")
    log = tmp_path / "argv.jsonl"
    base = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(tmp_path)}
    done = subprocess.run(
        [shutil.which(shell) or shell, str(script)],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done.returncode, done.stderr, calls


def _expected_argv(env: dict[str, str]) -> list[str]:
    argv = ["-m", "jobs.runner", env["SSM_Action"]]
    for option, name in RUNNER_OPTIONS:
        argv += [option, env[f"SSM_{name}"]]
    return argv


HOSTILE = [
    "python3 train.py --lr 0.1; rm -rf /",
    "python3 train.py $(touch {canary}) `touch {canary}`",
    "sh -c 'touch {canary}' && touch {canary} || touch {canary} | touch {canary} > {canary}",
    "python3 -c \"import os; os.system('touch {canary}')\" $SSM_JobId ${{HOME}} *",
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("command", HOSTILE)
def test_a_start_reaches_the_runner_as_one_argument_per_parameter(
    content: dict[str, Any], shell: str, command: str, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    env = _sent(
        content,
        JobId="llama-ft_2.run-7",
        Nodes="2",
        ProcsPerNode="8",
        RendezvousEndpoint="10.10.3.17:29400",
        WorkingDirectory="/fsx/checkpoints/llama-ft_2.run-7",
        Command=command.format(canary=canary),
    )
    code, stderr, calls = _run_step(content, shell, tmp_path, env)
    assert code == 0, stderr
    assert calls == [{"argv": _expected_argv(env), "pythonpath": INSTALL_PREFIX}]
    assert calls[0]["argv"][-1] == command.format(canary=canary)  # verbatim: the runner shlex-splits it
    assert not canary.exists()  # nothing of the command ran in the step's shell
    assert env["SSM_Action"] == "start" and env["SSM_MaxRestarts"] == str(RESTARTS)  # the defaults


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("action", ["status", "stop"])
def test_status_and_stop_need_only_the_job_id(content: dict[str, Any], shell: str, action: str, tmp_path: Path) -> None:
    env = _sent(content, Action=action, JobId="train-1")
    code, stderr, calls = _run_step(content, shell, tmp_path, env)
    assert code == 0, stderr
    (call,) = calls
    assert call["argv"] == _expected_argv(env)
    assert call["argv"][2:5] == [action, "--job-id", "train-1"]
    assert call["argv"][-2:] == ["--command", ""]


@pytest.mark.parametrize("shell", SHELLS)
def test_an_agent_without_env_var_interpolation_is_refused_before_the_runner(
    content: dict[str, Any], shell: str, tmp_path: Path
) -> None:
    code, stderr, calls = _run_step(content, shell, tmp_path, {})
    assert code == 2
    assert calls == []
    assert "SSM Agent 3.3.2746.0 or later" in stderr
