"""Evaluates a synthesized CloudWatch alarm over per-minute metric samples, by the rules the CloudWatch user
guide states (the tests in tests/flows/test_served_rollout.py hold this module to the guide's own examples).

Read from the template, nothing restated: each query's ``MetricStat`` (metric name, ``Period``, ``Stat``), the
returned ``Expression``, ``Threshold``, ``ComparisonOperator``, ``EvaluationPeriods``, ``DatapointsToAlarm`` and
``TreatMissingData``.

Metric math ("Use metric math", syntax and functions):

- arithmetic ``+ - * /``: a value missing in one time series is 0; a division by zero drops the datapoint;
- comparison ``== != <= >= < >`` and logical ``AND``/``&&``, ``OR``/``||``: 1 or 0 per datapoint; between two
  time series, a value missing in one of them is 0;
- ``FILL(ts, constant)``: the constant at every period that has no datapoint;
- ``IF(condition, a, b)``: per datapoint of the condition, ``a`` where it is not 0, else ``b``; where ``a`` is a
  time series without that datapoint, 0; where ``b`` is one without it (or left out), no datapoint; no datapoint
  where the condition has none.

Alarm evaluation ("Using Amazon CloudWatch alarms", how the state is evaluated when data is missing): the
alarm reads an evaluation range longer than ``EvaluationPeriods`` (the guide's example: 5 datapoints for 3);
with at least ``EvaluationPeriods`` datapoints in it, the most recent of them are evaluated; with fewer, the
missing ones are filled, as few as possible, by ``TreatMissingData``; ``DatapointsToAlarm`` of them breaching is
ALARM, fewer is OK. Only ``breaching`` and ``notBreaching`` are implemented (the platform's alarms use these);
anything the module does not know raises, so that an alarm written with more fails its test instead of passing.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The statistics, the arithmetic and the alarm comparisons as the unit tests' evaluator has them.
from tests.alarm_evaluator import _ARITHMETIC, _STATS
from tests.alarm_evaluator import _COMPARE as _ALARM_COMPARISON

#: A time series: period index -> value; an index that is absent has no datapoint.
TimeSeries = dict[int, float]
#: A metric's samples, one per minute from minute 0; None where nothing was published.
Samples = Sequence[float | None]

#: The evaluation range holds this many datapoints more than EvaluationPeriods (the guide's 5 for 3).
RANGE_BEYOND_EVALUATION = 2

_COMPARISON: dict[type, Callable[[float, float], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}

Value = float | TimeSeries  # a scalar or a time series


def _pairwise(left: Value, right: Value, combine: Callable[[float, float], float | None]) -> Value:
    """``combine`` per datapoint; between two time series over the union of their periods, a missing value 0."""
    if isinstance(left, dict) or isinstance(right, dict):
        periods = set(left) if isinstance(left, dict) else set()
        periods |= set(right) if isinstance(right, dict) else set()
        result: TimeSeries = {}
        for k in sorted(periods):
            a = left.get(k, 0.0) if isinstance(left, dict) else left
            b = right.get(k, 0.0) if isinstance(right, dict) else right
            value = combine(a, b)
            if value is not None:
                result[k] = value
        return result
    value = combine(left, right)
    if value is None:
        raise ZeroDivisionError("a scalar divided by zero")
    return value


def _divide(a: float, b: float) -> float | None:
    return None if b == 0 else a / b  # the datapoint is dropped


class Expression:
    """One metric math expression over named inputs, each a scalar or a time series of ``periods`` periods."""

    def __init__(self, text: str) -> None:
        self.text = text
        python = re.sub(r"\bAND\b|&&", " and ", text)
        python = re.sub(r"\bOR\b|\|\|", " or ", python)
        self.tree = ast.parse(python, mode="eval")
        functions = {c.func.id for c in ast.walk(self.tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        self.inputs = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} - functions

    def evaluate(self, inputs: Mapping[str, Value], periods: int) -> Value:
        self.periods = periods
        self.values = inputs
        return self._node(self.tree.body)

    def _node(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Name):
            return self.values[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _pairwise(0.0, self._node(node.operand), operator.sub)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            combine = _divide if isinstance(node.op, ast.Div) else _ARITHMETIC[type(node.op)]
            return _pairwise(self._node(node.left), self._node(node.right), combine)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARISON:
            compare = _COMPARISON[type(node.ops[0])]
            return _pairwise(self._node(node.left), self._node(node.comparators[0]), lambda a, b: float(compare(a, b)))
        if isinstance(node, ast.BoolOp):
            both = isinstance(node.op, ast.And)
            result = self._node(node.values[0])
            for other in node.values[1:]:
                result = _pairwise(
                    result,
                    self._node(other),
                    (lambda a, b: float(a != 0 and b != 0)) if both else (lambda a, b: float(a != 0 or b != 0)),
                )
            return result
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "FILL" and len(node.args) == 2:
                return self._fill(self._node(node.args[0]), self._node(node.args[1]))
            if node.func.id == "IF" and len(node.args) in (2, 3):
                return self._if(*(self._node(a) for a in node.args))
        raise NotImplementedError(f"metric math the evaluator does not know: {ast.unparse(node)} in {self.text}")

    def _fill(self, series: Value, constant: Value) -> TimeSeries:
        if not isinstance(series, dict) or isinstance(constant, dict):
            raise NotImplementedError(f"FILL of a time series with a constant only: {self.text}")
        return {k: series.get(k, constant) for k in range(self.periods)}

    def _if(self, condition: Value, when_true: Value, when_false: Value | None = None) -> Value:
        if not isinstance(condition, dict):
            chosen = when_true if condition != 0 else when_false
            return {} if chosen is None else chosen
        result: TimeSeries = {}
        for k, flag in condition.items():
            if flag != 0:
                result[k] = when_true.get(k, 0.0) if isinstance(when_true, dict) else when_true
            elif isinstance(when_false, dict):
                if k in when_false:
                    result[k] = when_false[k]
            elif when_false is not None:
                result[k] = when_false
        return result


def as_queries(alarm: Mapping[str, Any]) -> Mapping[str, Any]:
    """An alarm on one metric (``MetricName``, ``Statistic``, ``Period``) as a math alarm's single query."""
    if "Metrics" in alarm:
        return alarm
    if "Statistic" not in alarm:
        raise NotImplementedError(f"{alarm.get('AlarmName')}: a statistic other than {sorted(_STATS)}")
    stat = {"Metric": {"MetricName": alarm["MetricName"]}, "Period": alarm["Period"], "Stat": alarm["Statistic"]}
    return {**alarm, "Metrics": [{"Id": "m", "MetricStat": stat, "ReturnData": True}]}


def period_minutes(alarm: Mapping[str, Any]) -> int:
    """The period every query of the alarm shares (CloudWatch requires one), in minutes."""
    periods = {q["MetricStat"]["Period"] for q in alarm["Metrics"] if "MetricStat" in q}
    if len(periods) != 1:
        raise ValueError(f"{alarm.get('AlarmName')}: the metrics of one alarm must share one period, got {periods}")
    (seconds,) = periods
    if seconds % 60:
        raise NotImplementedError(f"a period of {seconds} s")
    return seconds // 60


def datapoints(stat: Mapping[str, Any], samples: Samples, minutes: int, count: int) -> TimeSeries:
    """One datapoint per period of ``minutes``: the statistic of the samples in it; none where it has none."""
    reduce = _STATS[stat["Stat"]]
    result: TimeSeries = {}
    for k in range(count):
        window = [v for v in samples[k * minutes : (k + 1) * minutes] if v is not None]
        if window:
            result[k] = float(reduce(window))
    return result


def alarm_values(alarm: Mapping[str, Any], samples: Mapping[str, Samples]) -> list[float | None]:
    """The alarm's datapoints, one per whole period of the samples (None: no datapoint), from its template
    properties; ``samples`` by metric name (the names within one alarm must differ)."""
    alarm = as_queries(alarm)
    minutes = period_minutes(alarm)
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    names = [q["MetricStat"]["Metric"]["MetricName"] for q in queries.values() if "MetricStat" in q]
    if len(set(names)) != len(names):
        raise NotImplementedError(f"two queries of one alarm read the same metric name: {names}")
    count = min(len(samples[n]) for n in names) // minutes
    computed: dict[str, Value] = {}

    def value_of(query_id: str) -> Value:
        if query_id not in computed:
            query = queries[query_id]
            if "MetricStat" in query:
                stat = query["MetricStat"]
                computed[query_id] = datapoints(stat, samples[stat["Metric"]["MetricName"]], minutes, count)
            else:
                expression = Expression(query["Expression"])
                computed[query_id] = expression.evaluate({i: value_of(i) for i in expression.inputs}, count)
        return computed[query_id]

    (returned,) = [q["Id"] for q in alarm["Metrics"] if q.get("ReturnData", True)]
    result = value_of(returned)
    if not isinstance(result, dict):
        raise ValueError(f"{alarm.get('AlarmName')}: the returned expression is a scalar, not a time series")
    return [result.get(k) for k in range(count)]


def evaluate_state(
    window: Sequence[float | None], *, breaches: Callable[[float], bool], periods: int, needed: int, treat: str
) -> str:
    """The state an alarm takes from the datapoints of its evaluation range (oldest first, None: missing)."""
    if treat not in ("breaching", "notBreaching"):
        raise NotImplementedError(f"TreatMissingData {treat!r}")
    existing = [v for v in window if v is not None]
    if len(existing) >= periods:
        evaluated = [breaches(v) for v in existing[-periods:]]
    else:
        evaluated = [breaches(v) for v in existing] + [treat == "breaching"] * (periods - len(existing))
    return "ALARM" if sum(evaluated) >= needed else "OK"


def alarm_states(alarm: Mapping[str, Any], samples: Mapping[str, Samples]) -> list[str]:
    """The alarm's state at the end of each whole period of the samples."""
    compare = _ALARM_COMPARISON[alarm["ComparisonOperator"]]
    threshold = float(alarm["Threshold"])
    periods = int(alarm["EvaluationPeriods"])
    needed = int(alarm.get("DatapointsToAlarm", periods))
    treat = alarm.get("TreatMissingData", "missing")
    values = alarm_values(alarm, samples)
    span = periods + RANGE_BEYOND_EVALUATION
    return [
        evaluate_state(
            values[max(0, k + 1 - span) : k + 1],
            breaches=lambda v: compare(v, threshold),
            periods=periods,
            needed=needed,
            treat=treat,
        )
        for k in range(len(values))
    ]
