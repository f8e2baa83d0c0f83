"""Make a synthesized template stable across machines and CDK CLI versions."""

from __future__ import annotations

import copy
import re
from typing import Any

_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str):
        return _HASH.sub("<asset-hash>", value)
    return value


def normalize_template(template: dict[str, Any]) -> dict[str, Any]:
    """Drop CDK version metadata and replace asset hashes with a placeholder."""
    out = copy.deepcopy(template)
    resources = out.get("Resources", {})
    for logical_id in [k for k, v in resources.items() if v["Type"] == "AWS::CDK::Metadata"]:
        del resources[logical_id]
    for res in resources.values():
        # The recipe's version hashes its components' content: a content hash.
        if res["Type"] == "AWS::ImageBuilder::ImageRecipe":
            res["Properties"]["Version"] = "<content-version>"
    conditions = out.get("Conditions", {})
    conditions.pop("CDKMetadataAvailable", None)
    if not conditions:
        out.pop("Conditions", None)
    return _scrub(out)
