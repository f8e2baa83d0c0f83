"""DCGM diagnostics for the GPU health check: the run level, its time budget, ``dcgmi diag -j`` JSON in,
per-test and per-GPU results out (pure, standard library only).

``dcgmi diag -r <level> -j`` reports differently across DCGM 3 and 4:

- DCGM 3: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"gpu_id" | "gpu_ids", "status", "warnings": [{"warning", "error_id", ...}], "info"}]}]}]}}``;
- DCGM 4: ``{"version", "entity_groups", "tests": [{"name", "test_summary": {"status"}, "results":
  [{"entity_group", "entity_id", "status", "errors" | "warnings": [{"msg" | "warning", ...}]}]}]}``,
  sometimes under a ``"DCGM Diagnostic"`` object with ``test_categories`` as in 3.

A status is Pass, Skip, Warn or Fail, per test and per GPU (or once for a system-wide test). When the
diagnostic cannot run DCGM says so inside the diagnostic object (``"runtime_error"``, or ``errors``
with no result): that, an output that is not JSON, and a document with no result or only Skips all
mean "the diagnostic did not run", which is never a pass (``DcgmOutcome.error``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Seconds a level may take before the check gives up on it. NVIDIA's dcgmi diag reference: level 1
#: "normally lasting seconds", 2 "approximately two minutes", 3 "approximately 15 minutes", 4 "extended,
#: longer-running" (no figure). The budgets leave room for 8-GPU types; config/fleets/health.py adds the
#: same numbers to the bootstrap's own budget for the launch hook's timeout (a test keeps both equal).
DCGM_LEVEL_TIMEOUT_S = {1: 180, 2: 600, 3: 2700, 4: 4500}
STATUSES = ("pass", "skip", "warn", "fail")


@dataclass(frozen=True)
class DcgmResult:
    test: str
    gpu: str | None  # None: a system-wide test (DCGM 3 deployment tests)
    status: str  # one of STATUSES
    message: str = ""

    def describe(self) -> str:
        where = f"GPU {self.gpu}: " if self.gpu is not None else ""
        return f"{self.test}: {where}{self.message or self.status}"


@dataclass(frozen=True)
class DcgmOutcome:
    """A DCGM diagnostic: ``error`` is set when it did not run or its output could not be read."""

    results: list[DcgmResult] = field(default_factory=list)
    error: str | None = None
    level: int = 1

    def with_status(self, status: str) -> list[DcgmResult]:
        return [result for result in self.results if result.status == status]

    @property
    def failures(self) -> list[str]:
        return list(dict.fromkeys(result.describe() for result in self.with_status("fail")))

    @property
    def failed_tests(self) -> list[str]:
        return list(dict.fromkeys(result.test for result in self.with_status("fail")))

    @property
    def warnings(self) -> list[str]:
        return list(dict.fromkeys(result.describe() for result in self.with_status("warn")))

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures


def _messages(node: Mapping[str, Any]) -> str:
    texts: list[str] = []
    for key in ("errors", "warnings", "error", "warning", "info"):
        items = node.get(key)
        if isinstance(items, (str, Mapping)):
            items = [items]
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping):
                item = item.get("warning") or item.get("msg") or item.get("message") or item.get("error") or ""
            if item and key != "info":
                texts.append(str(item).strip())
    return "; ".join(dict.fromkeys(texts))


def _gpu(node: Mapping[str, Any]) -> str | None:
    if str(node.get("entity_group", "GPU")).upper() != "GPU":
        return f"{node.get('entity_group')} {node.get('entity_id')}"
    for key in ("gpu_id", "gpu_ids", "entity_id"):
        if key in node:
            return str(node[key])
    return None


def _status(value: Any) -> str:
    text = str(value or "").strip().lower()
    return {"passed": "pass", "skipped": "skip", "warning": "warn", "failed": "fail", "failure": "fail"}.get(text, text)


class _Walk:
    def __init__(self) -> None:
        self.results: list[DcgmResult] = []
        self.summaries: list[DcgmResult] = []
        self.runtime_errors: list[str] = []

    def visit(self, node: Any, test: str) -> None:
        if isinstance(node, list):
            for item in node:
                self.visit(item, test)
            return
        if not isinstance(node, Mapping):
            return
        runtime = node.get("runtime_error")
        if runtime:
            self.runtime_errors.append(str(runtime).strip())
        test = str(node.get("name") or node.get("test_name") or test)
        status = _status(node.get("status"))
        if status in STATUSES:
            self.results.append(DcgmResult(test, _gpu(node), status, _messages(node)))
        for key, value in node.items():
            if key == "test_summary":  # DCGM 4 repeats the per-GPU verdicts once per test
                if isinstance(value, Mapping) and _status(value.get("status")) in STATUSES:
                    self.summaries.append(DcgmResult(test, None, _status(value.get("status")), _messages(value)))
            elif key not in ("entity_groups", "metadata"):
                self.visit(value, test)


def _diagnostic_errors(document: Mapping[str, Any]) -> list[str]:
    """``errors`` that DCGM put on the document or the diagnostic object itself, not on a result."""
    found: list[str] = []
    for node in (document, *(v for v in document.values() if isinstance(v, Mapping))):
        if "status" not in node and node.get("errors"):
            found.append(_messages({"errors": node["errors"]}))
    return [text for text in found if text]


def parse_dcgm_json(text: str, level: int = 1) -> DcgmOutcome:
    """``dcgmi diag -r <level> -j`` output (DCGM 3 or 4) -> its results, or why it did not run."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
        return DcgmOutcome(error=f"dcgmi diag output is not JSON ({err.msg}): {first}", level=level)
    if not isinstance(document, Mapping):
        return DcgmOutcome(error="dcgmi diag output is not a JSON object", level=level)
    walk = _Walk()
    walk.visit(document, "diag")
    results = walk.results
    summary_failures = [s for s in walk.summaries if s.status == "fail" and s.test not in {r.test for r in results}]
    results = results + summary_failures
    not_run = walk.runtime_errors or ([] if results else _diagnostic_errors(document))
    if not_run:
        return DcgmOutcome(results, f"dcgmi diag did not run: {'; '.join(not_run)}", level)
    if not results:
        return DcgmOutcome(error="dcgmi diag reported no test result: the diagnostic did not run", level=level)
    if all(result.status == "skip" for result in results):
        return DcgmOutcome(results, "dcgmi diag skipped every test: the diagnostic did not run", level)
    return DcgmOutcome(results, None, level)
