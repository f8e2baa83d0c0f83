"""CloudFormation's intrinsic functions evaluated over values the test gives for each reference."""

from __future__ import annotations

from typing import Any


def evaluate(value: Any, values: dict[str, str]) -> Any:
    """``value`` with Ref / Fn::GetAtt (looked up in ``values`` as ``id`` / ``id.Attribute``), Fn::Join,
    Fn::Split and Fn::Select evaluated as CloudFormation does."""
    if not isinstance(value, dict):
        return value
    ((fn, arg),) = value.items()
    if fn == "Ref":
        return values[arg]
    if fn == "Fn::GetAtt":
        return values[".".join(arg)]
    if fn == "Fn::Join":
        return arg[0].join(evaluate(p, values) for p in arg[1])
    if fn == "Fn::Split":
        return evaluate(arg[1], values).split(arg[0])
    if fn == "Fn::Select":
        return evaluate(arg[1], values)[arg[0]]
    raise AssertionError(f"cannot evaluate {value}")
