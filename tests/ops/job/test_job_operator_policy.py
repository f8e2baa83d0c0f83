"""The operator policy documented under "Training jobs" in docs/platform.md against the AWS calls that
``gpu-platform job`` (ops/job) and ``gpu-platform job fabric-test`` (ops/fabric) make.

The calls are read from the code (every ``.client("svc").method(...)``, a method of a name or attribute bound
to such a client, ``get_paginator("op")`` on one, and ``Aws.pages("svc", "op", ...)``), turned into IAM actions
with botocore's service models, and each request the commands make (action, resource ARN, condition keys) is
evaluated against the documented JSON statement with the placeholders filled from the staging test config. The
statement must allow every request, refuse the neighbouring ones (another document, another fleet's nodes,
another log group, another namespace) and grant no action the code does not call.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from config.loader import load_environment
from config.naming import ResourceNames
from ops.job.context import JOB_ACCESS
from tests.synth import TEST_CONFIG_DIR

ROOT = Path(__file__).resolve().parents[3]
PLATFORM_DOC = ROOT / "docs" / "platform.md"
OPERATOR_CODE = [ROOT / "ops" / "job", ROOT / "ops" / "fabric"]
FLEET = "training"
#: The Slurm side of the job commands (ops/job/slurm*.py) and the module whose wait it shares.
SLURM_CODE = sorted((ROOT / "ops" / "job").glob("slurm*.py"))
LOGIN_GROUP = "pcs_abcdef0123"  # <login node group id>
SSM_POLICY = "Who may run jobs"
SLURM_POLICY = "Who may use the Slurm fleets through the command"

#: Calls that need no permission: GetCallerIdentity answers whatever the policy says.
NEEDS_NO_PERMISSION = {"sts:GetCallerIdentity"}

Request = tuple[str, str, dict[str, str]]  # action, resource ARN, condition keys of the request


def _client_of(expr: ast.expr) -> str | None:
    """``svc`` when ``expr`` is ``<anything>.client("svc")``."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "client"
        and expr.args
        and isinstance(expr.args[0], ast.Constant)
        and isinstance(expr.args[0].value, str)
    ):
        return expr.args[0].value
    return None


def _strings(args: Iterable[ast.expr]) -> list[str]:
    return [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def scan(path: Path) -> set[tuple[str, str]]:
    """(client name, method or paginated operation) of each AWS call in one module."""
    tree = ast.parse(path.read_text(), str(path))
    bound = {
        ast.unparse(target): service
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and (service := _client_of(node.value))
        for target in node.targets
    }
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method, receiver = node.func.attr, node.func.value
        service = _client_of(receiver) or bound.get(ast.unparse(receiver))
        names = _strings(node.args)
        if method == "pages" and len(names) >= 2:
            found.add((names[0], names[1]))
        elif service and method == "get_paginator":
            found.add((service, names[0]))
        elif service:
            found.add((service, method))
    return found


def iam_actions(calls: set[tuple[str, str]]) -> set[str]:
    """``service:Operation`` of each call (the boto3 client name is the IAM prefix of every service used here)."""
    session = botocore.session.get_session()
    actions = set()
    for service, method in calls:
        operations = {xform_name(op): op for op in session.get_service_model(service).operation_names}
        assert method in operations, f"{service}.{method} is not an API call of {service}"
        actions.add(f"{service}:{operations[method]}")
    return actions


def code_actions(*folders: Path, leave_out: Iterable[Path] = ()) -> set[str]:
    files = {path for folder in folders for path in folder.glob("*.py")} - set(leave_out)
    return iam_actions({call for path in sorted(files) for call in scan(path)})


def slurm_actions() -> set[str]:
    """What the Slurm side calls: its own modules, and GetCommandInvocation through remote.wait."""
    return iam_actions({call for path in SLURM_CODE for call in scan(path)}) | {"ssm:GetCommandInvocation"}


def documented_policy(names: ResourceNames, region: str, account: str, title: str = SSM_POLICY) -> dict:
    """The JSON block after "**<title>.**" in the Training jobs section, placeholders filled."""
    text = PLATFORM_DOC.read_text()
    section = text[text.index("### Training jobs") :]
    section = section[: section.index("\n## ")]
    block = re.search(rf"\*\*{re.escape(title)}\.\*\*.*?```json\n(.*?)```", section, re.DOTALL)
    assert block, f"docs/platform.md: Training jobs: no ```json block after **{title}.**"
    filled = block.group(1)
    values = {"<region>": region, "<account>": account, "<env>": names.env, "<fleet>": FLEET}
    for placeholder, value in {**values, "<login node group id>": LOGIN_GROUP}.items():
        filled = filled.replace(placeholder, value)
    assert "<" not in filled, f"an unknown placeholder in the operator policy: {filled}"
    return json.loads(filled)


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def _condition_holds(condition: dict[str, dict[str, str | list[str]]], keys: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        compare = {"StringEquals": str.__eq__, "StringLike": fnmatchcase}[operator]  # others: KeyError, a failure
        for key, wanted in tests.items():
            if key not in keys or not any(compare(keys[key], w) for w in _listed(wanted)):
                return False
    return True


def allowed(policy: dict, request: Request) -> bool:
    action, resource, keys = request
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        if (
            any(fnmatchcase(action.lower(), a.lower()) for a in _listed(statement["Action"]))
            and any(fnmatchcase(resource, r) for r in _listed(statement["Resource"]))
            and _condition_holds(statement.get("Condition", {}), keys)
        ):
            return True
    return False


@pytest.fixture(scope="module")
def setting() -> tuple[dict, ResourceNames, str, str]:
    environment = load_environment("staging", TEST_CONFIG_DIR)
    names = ResourceNames.of(environment)
    region, account = environment.region, environment.account
    return documented_policy(names, region, account), names, region, account


def requests(names: ResourceNames, region: str, account: str) -> dict[str, list[Request]]:
    """Each action the commands call, with the resources and condition keys of its requests."""
    group = f"arn:aws:logs:{region}:{account}:log-group:{names.job_log_group}:*"
    node = f"arn:aws:ec2:{region}:{account}:instance/i-0123456789abcdef0"
    return {
        action: [(action, resource, keys) for resource, keys in made]
        for action, made in {
            "autoscaling:DescribeAutoScalingGroups": [("*", {})],
            "ec2:DescribeInstances": [("*", {})],
            "ec2:DescribeImages": [("*", {})],  # no resource type: the fabric check names the nodes' AMI
            "ssm:SendCommand": [
                (f"arn:aws:ssm:{region}:{account}:document/{names.job_document}", {}),
                (node, {"ssm:resourceTag/aws:autoscaling:groupName": names.asg_name(FLEET)}),
            ],
            "ssm:GetCommandInvocation": [("*", {})],
            "ssm:ListCommands": [("*", {})],
            "logs:DescribeLogStreams": [(group, {})],
            "logs:FilterLogEvents": [(group, {})],
            "cloudwatch:PutMetricData": [("*", {"cloudwatch:namespace": names.metrics_namespace})],
        }.items()
    }


def slurm_requests(region: str, account: str) -> dict[str, list[Request]]:
    """Each action the Slurm side calls, with the resources and condition keys of its requests."""
    login = f"arn:aws:ec2:{region}:{account}:instance/i-0123456789abcdef0"
    made: dict[str, list[tuple[str, dict[str, str]]]] = {
        "ssm:SendCommand": [
            (f"arn:aws:ssm:{region}::document/AWS-RunShellScript", {}),
            (login, {"ssm:resourceTag/aws:pcs:compute-node-group-id": LOGIN_GROUP}),
        ],
        **{
            action: [("*", {})]
            for action in (
                "ssm:GetCommandInvocation",
                "ec2:DescribeInstances",
                "pcs:ListClusters",
                "pcs:ListTagsForResource",
                "pcs:ListComputeNodeGroups",
                "pcs:ListQueues",
                "pcs:GetQueue",
            )
        },
    }
    return {action: [(action, resource, keys) for resource, keys in each] for action, each in made.items()}


def test_the_scan_reads_each_form_of_call(tmp_path: Path) -> None:
    assert scan(ROOT / "ops/job/remote.py") == {("ssm", "send_command"), ("ssm", "get_command_invocation")}
    assert scan(ROOT / "ops/job/history.py") == {("ssm", "list_commands")}
    assert scan(ROOT / "ops/job/nodes.py") == {
        ("autoscaling", "describe_auto_scaling_groups"),
        ("ec2", "describe_instances"),
    }
    assert scan(ROOT / "ops/fabric/command.py") == {("cloudwatch", "put_metric_data")}
    assert scan(ROOT / "ops/fabric/ami.py") == {("ec2", "describe_instances"), ("ec2", "describe_images")}
    assert scan(ROOT / "ops/fabric/jobs.py") == set()  # the fabric check calls AWS through ops/job
    paginated = tmp_path / "paginated.py"
    paginated.write_text('logs = session.client("logs")\nlogs.get_paginator("filter_log_events").paginate()\n')
    assert scan(paginated) == {("logs", "filter_log_events")}
    assert iam_actions({("logs", "describe_log_streams")}) == {"logs:DescribeLogStreams"}
    with pytest.raises(AssertionError, match="not an API call"):
        iam_actions({("ssm", "send_commands")})


def test_every_call_of_the_job_commands_has_its_requests_listed(setting) -> None:
    _, names, region, account = setting
    ssm_path = code_actions(*OPERATOR_CODE, leave_out=SLURM_CODE) - NEEDS_NO_PERMISSION
    assert ssm_path == set(requests(names, region, account))
    assert slurm_actions() - NEEDS_NO_PERMISSION == set(slurm_requests(region, account))


def test_the_documented_slurm_statement_allows_the_slurm_side_and_nothing_else(setting) -> None:
    _, names, region, account = setting
    policy = documented_policy(names, region, account, SLURM_POLICY)
    assert [r for made in slurm_requests(region, account).values() for r in made if not allowed(policy, r)] == []
    assert {a for s in policy["Statement"] for a in _listed(s["Action"])} == slurm_actions() - NEEDS_NO_PERMISSION
    node = f"arn:aws:ec2:{region}:{account}:instance/i-0123456789abcdef0"
    for request in [
        ("ssm:SendCommand", f"arn:aws:ssm:{region}:{account}:document/{names.job_document}", {}),
        ("ssm:SendCommand", node, {"ssm:resourceTag/aws:pcs:compute-node-group-id": "pcs_0000000000"}),
        ("ssm:SendCommand", node, {"ssm:resourceTag/aws:autoscaling:groupName": names.asg_name(FLEET)}),
        ("ssm:SendCommand", node, {}),
        ("ssm:ListCommands", "*", {}),
    ]:
        assert not allowed(policy, request), request


def test_the_documented_operator_policy_allows_every_request_of_the_job_commands(setting) -> None:
    policy, names, region, account = setting
    refused = [r for made in requests(names, region, account).values() for r in made if not allowed(policy, r)]
    assert refused == []


def test_the_documented_operator_policy_grants_nothing_the_commands_do_not_call(setting) -> None:
    policy, _, _, _ = setting
    granted = {a for s in policy["Statement"] for a in _listed(s["Action"])}
    assert granted == code_actions(*OPERATOR_CODE, leave_out=SLURM_CODE) - NEEDS_NO_PERMISSION


def test_the_documented_operator_policy_refuses_the_neighbouring_requests(setting) -> None:
    policy, names, region, account = setting
    node = f"arn:aws:ec2:{region}:{account}:instance/i-0123456789abcdef0"
    for request in [
        ("ssm:SendCommand", f"arn:aws:ssm:{region}::document/AWS-RunShellScript", {}),
        ("ssm:SendCommand", node, {"ssm:resourceTag/aws:autoscaling:groupName": names.asg_name("inference")}),
        ("ssm:SendCommand", node, {}),
        ("logs:FilterLogEvents", f"arn:aws:logs:{region}:{account}:log-group:/aws/ssm/sessions:*", {}),
        ("logs:GetLogEvents", f"arn:aws:logs:{region}:{account}:log-group:{names.job_log_group}:*", {}),
        ("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": "GpuPlatform/prod"}),
        ("cloudwatch:PutMetricData", "*", {}),
    ]:
        assert not allowed(policy, request), request


def test_the_access_denied_fix_of_the_job_commands_names_their_calls() -> None:
    named = set(re.findall(r"[a-z0-9-]+:[A-Z][A-Za-z]+", JOB_ACCESS))
    assert named == code_actions(ROOT / "ops" / "job") - NEEDS_NO_PERMISSION
