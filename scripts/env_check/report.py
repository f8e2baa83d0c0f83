"""The check's report on stdout (text lines or JSON), and the one-line errors on stderr (exit 2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from scripts.env_check.expectations import Expectations
from scripts.env_check.judge import CheckResult


def print_report(expected: Expectations, results: Sequence[CheckResult], as_json: bool) -> None:
    """``PASS|FAIL <check>: <detail>`` per check, or one JSON document with the same results."""
    if not as_json:
        for result in results:
            print(result.line())
        return
    report = {
        "environment": expected.environment,
        "account": expected.account,
        "region": expected.region,
        "passed": all(r.passed for r in results),
        "checks": [asdict(r) for r in results],
    }
    print(json.dumps(report, indent=2))


def print_error(lines: Sequence[str], env: str, as_json: bool) -> int:
    """Print why the checks could not run (stderr; and a failed JSON report on stdout); returns exit status 2."""
    for line in lines:
        print(line, file=sys.stderr)
    if as_json:
        print(json.dumps({"environment": env, "passed": False, "error": "\n".join(lines)}, indent=2))
    return 2
