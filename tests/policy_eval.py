"""A small IAM policy evaluator, so that a test can follow a request through every policy it meets.

It answers one question the way AWS's evaluation logic does for a single account: does this
principal, calling this action on this resource with these request context keys, get an allow
from a set of statements, with an explicit deny winning over any allow? It is deliberately
small: the condition operators the platform's policies use, wildcards in actions, resources and
condition values, ``Not*`` elements, ``...IfExists`` and the ``ForAnyValue:`` / ``ForAllValues:``
set prefixes. Policies come from synthesized templates with their intrinsics resolved
(``tests.iam_documents.Resolver``).

Flows chain the answers: a CloudWatch alarm reaches a person only if the topic policy allows
``cloudwatch.amazonaws.com`` to publish AND the topic's key policy lets it use the key; a role's
call succeeds only if its identity policies allow it AND its permissions boundary does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALLOW, EXPLICIT_DENY, IMPLICIT_DENY = "Allow", "ExplicitDeny", "ImplicitDeny"


@dataclass(frozen=True)
class Request:
    """One API call. ``principal`` is ``{"Service": "..."}`` or ``{"AWS": "<arn>"}`` (resource policies only)."""

    action: str
    resource: str
    principal: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)

    def key(self, name: str) -> Any:
        lowered = {k.lower(): v for k, v in self.context.items()}
        return lowered.get(name.lower())


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _glob(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    # IAM wildcards: * any run of characters, ? one character; nothing else is special.
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    flags = 0 if case_sensitive else re.IGNORECASE
    return re.fullmatch(regex, value, flags | re.DOTALL) is not None


def _matches_action(patterns: Iterable[str], action: str) -> bool:
    return any(_glob(p, action, case_sensitive=False) for p in patterns)


def _matches_resource(patterns: Iterable[str], resource: str) -> bool:
    return any(_glob(p, resource, case_sensitive=True) for p in patterns)


def _matches_principal(principal_element: Any, principal: Mapping[str, str]) -> bool:
    if principal_element == "*":
        return True
    if not isinstance(principal_element, Mapping):
        return False
    for kind, values in principal_element.items():
        for value in _as_list(values):
            if value == "*" and kind == "AWS":
                return True
            if kind in principal and principal[kind] == value:
                return True
            # An account root ("arn:aws:iam::123:root" or "123") delegates to every principal of that account.
            if kind == "AWS" and "AWS" in principal:
                account = value.split(":")[4] if value.startswith("arn:") else value
                root = value.endswith(":root") or value.isdigit()
                if root and principal["AWS"].split(":")[4] == account:
                    return True
    return False


def _compare(operator: str, expected: str, actual: Any) -> bool:
    actual_text = str(actual).lower() if isinstance(actual, bool) else str(actual)
    base = operator.removesuffix("IfExists")
    if base in ("StringEquals", "ArnEquals"):
        return actual_text == expected
    if base == "StringEqualsIgnoreCase":
        return actual_text.lower() == expected.lower()
    if base in ("StringLike", "ArnLike"):
        return _glob(expected, actual_text, case_sensitive=True)
    if base == "Bool":
        return actual_text.lower() == expected.lower()
    if base == "NumericEquals":
        return float(actual_text) == float(expected)
    if base == "NumericLessThan":
        return float(actual_text) < float(expected)
    if base == "NumericLessThanEquals":
        return float(actual_text) <= float(expected)
    if base == "NumericGreaterThanEquals":
        return float(actual_text) >= float(expected)
    raise ValueError(f"condition operator {operator} is not supported by this evaluator")


_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
}


def _condition_holds(operator: str, key: str, expected_values: Any, request: Request) -> bool:
    expected = [str(v).lower() if isinstance(v, bool) else str(v) for v in _as_list(expected_values)]
    qualifier = ""
    if ":" in operator and operator.split(":", 1)[0] in ("ForAnyValue", "ForAllValues"):
        qualifier, operator = operator.split(":", 1)
    actual = request.key(key)
    if operator == "Null":
        return (actual is None) == (expected[0].lower() == "true")
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    negated = base in _NEGATED
    positive = _NEGATED.get(base, base)
    if actual is None:
        # A missing key: ...IfExists and negated operators hold, everything else fails.
        return if_exists or negated or qualifier == "ForAllValues"
    values = _as_list(actual)
    if qualifier == "ForAllValues":
        hit = all(any(_compare(positive, e, v) for e in expected) for v in values)
    else:
        hit = any(_compare(positive, e, v) for e in expected for v in values)
    return not hit if negated else hit


def _statement_applies(statement: Mapping[str, Any], request: Request, *, resource_policy: bool) -> bool:
    if "Action" in statement and not _matches_action(_as_list(statement["Action"]), request.action):
        return False
    if "NotAction" in statement and _matches_action(_as_list(statement["NotAction"]), request.action):
        return False
    if "Resource" in statement and not _matches_resource(_as_list(statement["Resource"]), request.resource):
        return False
    if "NotResource" in statement and _matches_resource(_as_list(statement["NotResource"]), request.resource):
        return False
    if resource_policy:
        if "Principal" in statement and not _matches_principal(statement["Principal"], request.principal):
            return False
        if "NotPrincipal" in statement and _matches_principal(statement["NotPrincipal"], request.principal):
            return False
    for operator, keys in statement.get("Condition", {}).items():
        for key, expected in keys.items():
            if not _condition_holds(operator, key, expected, request):
                return False
    return True


def decide(documents: Sequence[Mapping[str, Any]], request: Request, *, resource_policy: bool = False) -> str:
    """ALLOW, EXPLICIT_DENY or IMPLICIT_DENY for the request against these policy documents together."""
    allowed = False
    for document in documents:
        for statement in _as_list(document.get("Statement")):
            if not _statement_applies(statement, request, resource_policy=resource_policy):
                continue
            if statement["Effect"] == "Deny":
                return EXPLICIT_DENY
            allowed = True
    return ALLOW if allowed else IMPLICIT_DENY


def role_may(identity: Sequence[Mapping[str, Any]], boundary: Mapping[str, Any] | None, request: Request) -> bool:
    """A role's call: its identity policies must allow it and its permissions boundary (if any) too."""
    if decide(identity, request) != ALLOW:
        return False
    return boundary is None or decide([boundary], request) == ALLOW


def service_may(resource_policy: Mapping[str, Any], request: Request) -> bool:
    """A service principal (or another account's principal) acting on a resource: the resource policy decides."""
    return decide([resource_policy], request, resource_policy=True) == ALLOW


def _names_an_account_only(principal_element: Any) -> bool:
    """A Principal that is only account roots ("arn:...:root" or a bare account id)."""
    if not isinstance(principal_element, Mapping) or set(principal_element) != {"AWS"}:
        return False
    values = _as_list(principal_element["AWS"])
    return bool(values) and all(str(v).endswith(":root") or str(v).isdigit() for v in values)


def key_policy_may(
    key_policy: Mapping[str, Any], request: Request, *, identity: Sequence[Mapping[str, Any]] = ()
) -> bool:
    """A call on a KMS key. The key policy is the only source of authority: a statement that names an
    account (its root) does not allow anything by itself, it lets that account's IAM policies decide,
    so it counts only where the caller's ``identity`` policies allow the call as well. A statement that
    names the caller (or ``*`` with conditions on it) allows directly. An explicit deny wins."""
    statements = _as_list(key_policy.get("Statement"))
    if decide([key_policy], request, resource_policy=True) == EXPLICIT_DENY:
        return False
    direct = [s for s in statements if not _names_an_account_only(s.get("Principal"))]
    delegated = [s for s in statements if _names_an_account_only(s.get("Principal"))]
    if decide([{"Statement": direct}], request, resource_policy=True) == ALLOW:
        return True
    return decide([{"Statement": delegated}], request, resource_policy=True) == ALLOW and decide(identity, request) == (
        ALLOW
    )


def same_account_may(
    resource_policy: Mapping[str, Any], identity: Sequence[Mapping[str, Any]], request: Request
) -> bool:
    """A principal of the resource's own account (SNS, S3): its identity policies OR the resource policy
    may allow; an explicit deny in either wins."""
    if EXPLICIT_DENY in (decide([resource_policy], request, resource_policy=True), decide(identity, request)):
        return False
    return ALLOW in (decide([resource_policy], request, resource_policy=True), decide(identity, request))


def explain(documents: Sequence[Mapping[str, Any]], request: Request, *, resource_policy: bool = False) -> str:
    """The Sids of the statements that apply, for an assertion message."""
    sids = [
        str(s.get("Sid", "?"))
        for d in documents
        for s in _as_list(d.get("Statement"))
        if _statement_applies(s, request, resource_policy=resource_policy)
    ]
    return f"{request.action} on {request.resource} by {dict(request.principal)}: statements {sids or 'none'}"


__all__ = [
    "ALLOW",
    "EXPLICIT_DENY",
    "IMPLICIT_DENY",
    "Request",
    "decide",
    "explain",
    "key_policy_may",
    "role_may",
    "same_account_may",
    "service_may",
]
