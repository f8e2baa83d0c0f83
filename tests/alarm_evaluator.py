"""Evaluates a synthesized CloudWatch alarm over per-minute metric series, as CloudWatch would.

Driven only by the template: each query's ``MetricStat`` (metric name, ``Period``, ``Stat``), the
returned math ``Expression``, ``EvaluationPeriods``, ``DatapointsToAlarm``, ``Threshold``,
``ComparisonOperator`` and ``TreatMissingData``; a composite alarm by its ``AlarmRule``. It knows
the arithmetic operators (+ - * / and parentheses), FILL with a constant and the statistics the
platform's alarms use; anything else raises, so that an alarm written with more than this understands fails its test
instead of passing it by accident.
"""

from __future__ import annotations

import ast
import operator
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: A metric's samples, one per minute from minute 0; ``None`` where nothing was published.
Series = Sequence[float | None]

_STATS: dict[str, Callable[[list[float]], float]] = {
    "Average": statistics.fmean,
    "Minimum": min,
    "Maximum": max,
    "Sum": sum,
    "SampleCount": len,
}
_ARITHMETIC: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}


def period_minutes(alarm: Mapping[str, Any]) -> int:
    periods = {q["MetricStat"]["Period"] for q in alarm["Metrics"] if "MetricStat" in q}
    assert len(periods) == 1, f"{alarm['AlarmName']}: the queries of one alarm share one period, got {periods}"
    (seconds,) = periods
    assert seconds % 60 == 0, seconds
    return seconds // 60


def _datapoints(stat: Mapping[str, Any], series: Mapping[str, Series], minutes: int, count: int) -> list[float | None]:
    name = stat["Metric"]["MetricName"]
    samples = series[name]
    reduce = _STATS[stat["Stat"]]
    points: list[float | None] = []
    for k in range(count):
        window = [v for v in samples[k * minutes : (k + 1) * minutes] if v is not None]
        points.append(reduce(window) if window else None)
    return points


def _evaluate(node: ast.AST, values: Mapping[str, float | None]) -> float | None:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _evaluate(node.operand, values)
        return None if inner is None else -inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "FILL":
        # FILL(series, constant): the constant where the series has no datapoint.
        series, constant = node.args
        inner = _evaluate(series, values)
        return _evaluate(constant, values) if inner is None else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        if left is None or right is None:  # a timestamp missing in one series is missing in the result
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    raise NotImplementedError(f"metric math the evaluator does not know: {ast.dump(node)}")


def expression_values(alarm: Mapping[str, Any], series: Mapping[str, Series]) -> list[float | None]:
    """One value per period of the alarm's returned expression (or its single metric)."""
    minutes = period_minutes(alarm)
    count = min(len(s) for s in series.values()) // minutes
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    computed: dict[str, list[float | None]] = {}

    def values_of(query_id: str) -> list[float | None]:
        if query_id not in computed:
            query = queries[query_id]
            if "MetricStat" in query:
                computed[query_id] = _datapoints(query["MetricStat"], series, minutes, count)
            else:
                tree = ast.parse(query["Expression"], mode="eval")
                functions = {
                    c.func.id for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                }
                names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - functions
                inputs = {name: values_of(name) for name in names}
                computed[query_id] = [_evaluate(tree, {n: inputs[n][k] for n in names}) for k in range(count)]
        return computed[query_id]

    (returned,) = [q["Id"] for q in alarm["Metrics"] if q.get("ReturnData", True)]
    return values_of(returned)


def alarm_states(alarm: Mapping[str, Any], series: Mapping[str, Series]) -> list[str]:
    """The alarm's state at the end of each period: ``ALARM`` or ``OK``."""
    treat = alarm.get("TreatMissingData", "missing")
    if treat not in ("notBreaching", "breaching"):
        raise NotImplementedError(f"TreatMissingData {treat!r}")
    compare = _COMPARE[alarm["ComparisonOperator"]]
    threshold = float(alarm["Threshold"])
    needed = alarm.get("DatapointsToAlarm", alarm["EvaluationPeriods"])

    def breaching(value: float | None) -> bool:
        return treat == "breaching" if value is None else compare(value, threshold)

    points = expression_values(alarm, series)
    states = []
    for k in range(len(points)):
        window = points[max(0, k + 1 - alarm["EvaluationPeriods"]) : k + 1]
        states.append("ALARM" if sum(map(breaching, window)) >= needed else "OK")
    return states


def first_alarm_minute(alarm: Mapping[str, Any], series: Mapping[str, Series]) -> int | None:
    """Minute at whose end the alarm first goes to ALARM, or None."""
    minutes = period_minutes(alarm)
    for k, state in enumerate(alarm_states(alarm, series)):
        if state == "ALARM":
            return (k + 1) * minutes
    return None


def rule_children(rule: Any) -> str:
    """A composite's ``AlarmRule`` as text, each ``Fn::GetAtt [id, Arn]`` written as its logical id."""
    if isinstance(rule, str):
        return rule
    parts = rule["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else p["Fn::GetAtt"][0] for p in parts)


def composite_state(rule: Any, states: Mapping[str, str]) -> str:
    """Evaluate ``ALARM("x") OR ALARM("y") ...`` against the children's states (by logical id)."""
    text = rule_children(rule)
    text = re.sub(r'(ALARM|OK|INSUFFICIENT_DATA)\("([^"]+)"\)', lambda m: str(states[m[2]] == m[1]), text)
    text = re.sub(r"\b(AND|OR|NOT)\b", lambda m: m[1].lower(), text)
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Expression | ast.BoolOp | ast.And | ast.Or | ast.UnaryOp | ast.Not | ast.Constant):
            raise NotImplementedError(f"alarm rule the evaluator does not know: {text}")
    return "ALARM" if _truth(tree.body) else "OK"


def _truth(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.UnaryOp):
        return not _truth(node.operand)
    assert isinstance(node, ast.BoolOp)
    results = [_truth(v) for v in node.values]
    return all(results) if isinstance(node.op, ast.And) else any(results)
