"""Every role of a synthesized environment with what its policies say, ready for tests.policy_eval.

A role's identity policies are its inline ``Policies``, the ``AWS::IAM::Policy`` and
``AWS::IAM::ManagedPolicy`` resources that list it in ``Roles``, and the AWS managed policies in
its ``ManagedPolicyArns`` (their documents are AWS's, written out below). The permissions
boundary is the environment's, from its Security stack; every role must carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.naming import ResourceNames
from tests.iam_documents import Resolver
from tests.policy_eval import Request
from tests.synth import StackTemplate, Synth

#: AWS managed policies the platform's roles attach, as AWS publishes them
#: (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSLambdaBasicExecutionRole.html).
AWS_MANAGED = {
    "service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": "*",
            }
        ],
    }
}


@dataclass
class RolePolicies:
    stack: str
    logical_id: str
    identity: list[dict[str, Any]]
    boundary: dict[str, Any]
    #: the role's ARN as CloudFormation names it (its RoleName, else a generated name)
    arn: str = ""

    @property
    def as_caller(self) -> dict[str, str]:
        """The request context of a call the role makes (what aws:PrincipalArn conditions read)."""
        return {"aws:PrincipalArn": self.arn}


def _sub(value: Any, resolver: Resolver) -> Any:
    """``Fn::Sub`` with pseudo parameters only (what CDK's providers write), then the Resolver."""
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        text = value["Fn::Sub"]
        for name in ("AWS::Partition", "AWS::Region", "AWS::AccountId", "AWS::URLSuffix"):
            text = text.replace("${" + name + "}", str(resolver.resolve({"Ref": name})))
        return text
    return resolver.resolve(value)


def resolver_for(synth: Synth, stack: StackTemplate) -> Resolver:
    cfg = synth.environments[stack.env]
    return Resolver(stack.json, account=cfg.account, region=cfg.region)


def boundary_document(synth: Synth, env: str) -> dict[str, Any]:
    security = synth.stack(env, "Security")
    name = ResourceNames.of(synth.environments[env]).permissions_boundary
    (policy,) = [
        p["Properties"]
        for p in security.resources("AWS::IAM::ManagedPolicy").values()
        if p["Properties"].get("ManagedPolicyName") == name
    ]
    return resolver_for(synth, security).resolve(policy["PolicyDocument"])


def _boundary_logical_id(synth: Synth, env: str) -> str:
    name = ResourceNames.of(synth.environments[env]).permissions_boundary
    security = synth.stack(env, "Security")
    (logical_id,) = [
        k
        for k, p in security.resources("AWS::IAM::ManagedPolicy").items()
        if p["Properties"].get("ManagedPolicyName") == name
    ]
    return logical_id


def _is_the_boundary(ref: Any, synth: Synth, stack: StackTemplate) -> bool:
    logical_id = _boundary_logical_id(synth, stack.env)
    if stack.name.endswith("-Security"):
        return ref == {"Ref": logical_id}
    output = ref.get("Fn::GetStackOutput", {}) if isinstance(ref, dict) else {}
    return output.get("StackName") == f"{stack.env}-Security" and f"Ref{logical_id}" in output.get("OutputName", "")


def _generated_role_name(stack_name: str, logical_id: str) -> str:
    """The name CloudFormation gives a role without RoleName: ``<stack>-<logical id>-<suffix>``, the
    logical id cut so that the name keeps to IAM's 64 characters."""
    suffix = "AbCdEf012345"
    return f"{stack_name}-{logical_id}"[: 64 - len(suffix) - 1] + f"-{suffix}"


def _role_output(synth: Synth, ref: Any) -> tuple[str, str, str] | None:
    """(stack, role logical id, "Ref" or "Arn") of a cross-stack reference to a role, else None."""
    output = ref.get("Fn::GetStackOutput") if isinstance(ref, dict) else None
    if not output or output.get("StackName") not in synth.stacks:
        return None
    stack = synth.stacks[output["StackName"]]
    for logical_id in stack.resources("AWS::IAM::Role"):
        if f"Ref{logical_id}" in output["OutputName"]:
            return stack.name, logical_id, "Ref"
        if f"FnGetAtt{logical_id}Arn" in output["OutputName"]:
            return stack.name, logical_id, "Arn"
    return None


def _cross_stack_roles(value: Any, synth: Synth, account: str) -> Any:
    """Cross-stack references to roles replaced by the role's name or ARN as CloudFormation makes them."""
    found = _role_output(synth, value)
    if found:
        stack_name, logical_id, kind = found
        name = _generated_role_name(stack_name, logical_id)
        return name if kind == "Ref" else f"arn:aws:iam::{account}:role/{name}"
    if isinstance(value, dict):
        return {k: _cross_stack_roles(v, synth, account) for k, v in value.items()}
    if isinstance(value, list):
        return [_cross_stack_roles(v, synth, account) for v in value]
    return value


def roles(synth: Synth, env: str) -> list[RolePolicies]:
    """Every role of ``env``'s stacks, each with its identity policies and the environment's boundary.

    Fails (AssertionError) on a role without the environment's boundary or with an AWS managed
    policy whose document this module does not know.
    """
    boundary = boundary_document(synth, env)
    account = synth.environments[env].account
    stacks = [s for s in synth.stacks.values() if s.env == env]
    # policies by the role they attach to, (stack, logical id), wherever the policy is
    attached: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for stack in stacks:
        resolver = resolver_for(synth, stack)
        for type_ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for policy in stack.resources(type_).values():
                props = policy["Properties"]
                document = resolver.resolve(_cross_stack_roles(props["PolicyDocument"], synth, account))
                for ref in props.get("Roles", []):
                    if isinstance(ref, dict) and "Ref" in ref:
                        attached.setdefault((stack.name, ref["Ref"]), []).append(document)
                    elif (target := _role_output(synth, ref)) and target[2] == "Ref":
                        attached.setdefault(target[:2], []).append(document)
    found = []
    for stack in stacks:
        resolver = resolver_for(synth, stack)
        for logical_id, role in stack.resources("AWS::IAM::Role").items():
            props = role["Properties"]
            assert _is_the_boundary(props.get("PermissionsBoundary"), synth, stack), (
                f"{stack.name}/{logical_id} does not carry the environment's permissions boundary"
            )
            identity = [resolver.resolve(p["PolicyDocument"]) for p in props.get("Policies", [])]
            identity += attached.get((stack.name, logical_id), [])
            for arn in props.get("ManagedPolicyArns", []):
                resolved = _sub(arn, resolver)
                assert isinstance(resolved, str) and ":iam::aws:policy/" in resolved, (
                    f"{stack.name}/{logical_id}: managed policy {arn} is not an AWS managed one"
                )
                name = resolved.split(":iam::aws:policy/", 1)[1]
                assert name in AWS_MANAGED, f"{stack.name}/{logical_id}: add the document of {name} to AWS_MANAGED"
                identity.append(AWS_MANAGED[name])
            name = props.get("RoleName")
            name = name if isinstance(name, str) else _generated_role_name(stack.name, logical_id)
            found.append(
                RolePolicies(stack.name, logical_id, identity, boundary, f"arn:aws:iam::{account}:role/{name}")
            )
    return found


def role(synth: Synth, env: str, stack: str, logical_id_prefix: str) -> RolePolicies:
    (found,) = [
        r for r in roles(synth, env) if r.stack == f"{env}-{stack}" and r.logical_id.startswith(logical_id_prefix)
    ]
    return found


#: Stands in for each "*" of a resource ARN: a representative name the pattern admits.
SAMPLE = "sample0"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _context(statement: dict[str, Any]) -> dict[str, Any]:
    """A request context that meets the statement's own (positive) conditions."""
    context: dict[str, Any] = {}
    for operator, keys in statement.get("Condition", {}).items():
        base = operator.split(":")[-1].removesuffix("IfExists")
        if base.startswith(("StringNot", "ArnNot", "Null")):
            continue
        for key, values in keys.items():
            context[key] = str(_list(values)[0]).replace("*", SAMPLE)
    return context


def granted_requests(role: RolePolicies, account: str, region: str) -> list[tuple[Request, str]]:
    """One request per action and resource each Allow statement of the role's identity policies grants (each "*"
    of a resource as ``SAMPLE``, the statement's own conditions met), with the statement's Sid."""
    found = []
    for document in role.identity:
        for statement in _list(document["Statement"]):
            if statement["Effect"] != "Allow":
                continue
            for action in _list(statement["Action"]):
                assert "*" not in action, f"{role.stack}/{role.logical_id}: wildcard action {action}"
                for resource in _list(statement.get("Resource", "*")):
                    context = {**role.as_caller, **_context(statement)}
                    sample = resource if resource == "*" else resource.replace("*", SAMPLE)
                    if sample.startswith("arn:"):  # the owner of the resource (S3 ARNs name none: this account's)
                        context.setdefault("aws:ResourceAccount", sample.split(":")[4] or account)
                    if action.startswith("kms:") and sample.split(":")[4] not in (account, SAMPLE):
                        # another account's key (an AMI copy's source snapshots): EC2 uses it on the role's behalf
                        context.setdefault("kms:ViaService", f"ec2.{region}.amazonaws.com")
                    found.append((Request(action, sample, context=context), statement.get("Sid", "")))
    return found
