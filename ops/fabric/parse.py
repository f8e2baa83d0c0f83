"""Read the result table of nccl-tests' ``all_reduce_perf`` (and of ``scripts/node/fabric/allreduce_bench.py``,
which prints the same table) out of a whole log.

What a log may hold around the table, all of it skipped or used as a fact:

- launcher prefixes on every line: Slurm ``0: `` / ``10: ``, Open MPI ``[1,0]<stdout>:``, torchrun
  ``[default0]:``;
- both table generations: nccl-tests <= 2.10 (no ``root`` column, ``error`` holds a float) and later
  (``root``, integer ``#wrong``, sometimes ``N/A``);
- NCCL INFO lines anywhere (between header and rows, after the footer), ssh / PMIX / libfabric noise,
  ``...`` elisions, a missing header or footer, columns wider than their header (split on whitespace).

Facts taken from the log besides the rows: the number of ranks (``# Rank N`` lines, else derived from
busbw / algbw = 2(n-1)/n), the collective (``Collective test starting:`` line, else the rows' redop and
root), the NCCL transport (``Using network Socket`` / ``AWS Libfabric``, ``Selected Provider is efa``),
the footer's average and out-of-bounds count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PREFIXES = (
    re.compile(r"^\s*\[\d+,\d+\]<std(?:out|err)>:"),  # Open MPI --tag-output
    re.compile(r"^\s*\d+:\s"),  # Slurm --label
    re.compile(r"^\s*\[[A-Za-z_]+\d+\]:"),  # torchrun --tee
)
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s")
_COLLECTIVE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_AVERAGE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_NICS = re.compile(r"Selected [Pp]rovider is efa(?: \(found (\d+) nics\))?")
_SOCKET = ("Using network Socket", "NET/Socket", "via NET/Socket")
_EFA = ("Using network AWS Libfabric", "NET/AWS Libfabric", "Selected Provider is efa", "Selected provider is efa")


@dataclass(frozen=True)
class Measure:
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    """Wrong elements (nccl-tests >= 2.11); None in the old format (its ``error`` is a float) or ``N/A``."""


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    root: int | None
    """None in the old format, which has no root column."""
    out_of_place: Measure
    in_place: Measure

    @property
    def busbw(self) -> float:
        """The better of the two measurements at this size (they differ by >10% on healthy runs)."""
        return max(self.out_of_place.busbw, self.in_place.busbw)


@dataclass
class Table:
    rows: list[Row] = field(default_factory=list)
    ranks: int | None = None
    ranks_from: str = "none"
    """``header`` (``# Rank`` lines), ``busbw`` (an estimate from the largest row: exact for one rank, whose
    busbw is 0, and close for a few; rounding and launcher settings make it drift for many) or ``none``."""
    collective: str | None = None
    average_busbw: float | None = None
    out_of_bounds: int | None = None
    transport: str | None = None
    """``efa``, ``socket`` or None (the log has no NCCL INFO lines about the network)."""
    efa_nics: int | None = None

    @property
    def is_all_reduce(self) -> bool:
        if self.collective is not None:
            return self.collective == "all_reduce_perf"
        return bool(self.rows) and all(r.redop == "sum" and r.root in (None, -1) for r in self.rows)

    @property
    def wrong(self) -> int | None:
        """Wrong elements over both columns of every row; None when the rows do not count them (old format,
        ``N/A``): then only the footer's ``out_of_bounds`` speaks of correctness."""
        counts = [m.wrong for r in self.rows for m in (r.out_of_place, r.in_place)]
        if not counts or any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None)

    @property
    def peak_busbw(self) -> float:
        """The largest out-of-place busbw (0 without rows)."""
        return max((r.out_of_place.busbw for r in self.rows), default=0.0)

    @property
    def peak_busbw_in_place(self) -> float:
        return max((r.in_place.busbw for r in self.rows), default=0.0)

    def row(self, size: int) -> Row | None:
        return next((r for r in self.rows if r.size == size), None)


def strip_prefix(line: str) -> str:
    for prefix in _PREFIXES:
        match = prefix.match(line)
        if match:
            return line[match.end() :]
    return line


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _measure(time: str, algbw: str, busbw: str, wrong: str, *, counted: bool) -> Measure | None:
    values = [_number(time), _number(algbw), _number(busbw)]
    if any(v is None for v in values):
        return None
    t, a, b = (float(v) for v in values if v is not None)
    count = int(wrong) if counted and wrong.isdigit() else None
    if counted and count is None and wrong != "N/A":
        return None
    if not counted and _number(wrong) is None:
        return None
    return Measure(time_us=t, algbw=a, busbw=b, wrong=count)


def parse_row(text: str) -> Row | None:
    """A data row (either generation), or None for any other line."""
    cells = text.split()
    if len(cells) not in (12, 13) or not (cells[0].isdigit() and cells[1].isdigit()):
        return None
    if not (cells[2].isalpha() or cells[2].isalnum()) or not cells[3].isalpha():
        return None
    new = len(cells) == 13
    root = None
    if new:
        if not re.fullmatch(r"-?\d+", cells[4]):
            return None
        root = int(cells[4])
    first = 5 if new else 4
    oop = _measure(*cells[first : first + 4], counted=new)
    ip = _measure(*cells[first + 4 : first + 8], counted=new)
    if oop is None or ip is None:
        return None
    return Row(int(cells[0]), int(cells[1]), cells[2], cells[3], root, oop, ip)


def _ranks_from_busbw(rows: list[Row]) -> int | None:
    """n from busbw / algbw = 2(n-1)/n at the largest row with a measurable algbw (two decimals printed)."""
    for row in sorted(rows, key=lambda r: r.size, reverse=True):
        m = row.out_of_place
        if m.algbw >= 1.0:
            ratio = m.busbw / m.algbw
            return 1 if ratio < 0.5 else max(2, round(2 / max(2 - ratio, 1e-3)))
        if m.algbw > 0 and m.busbw == 0:
            return 1
    return None


def parse(text: str) -> Table:
    """Every fact of one log; a table without rows when the log holds none."""
    table = Table()
    ranks: set[int] = set()
    for raw in text.splitlines():
        line = strip_prefix(raw).strip()
        if not line:
            continue
        if "NCCL INFO" in line or "NET/" in line:
            if any(s in line for s in _SOCKET):
                table.transport = "socket"
            elif any(s in line for s in _EFA) and table.transport != "socket":
                table.transport = "efa"
            nics = _NICS.search(line)
            if nics and nics.group(1):
                table.efa_nics = max(table.efa_nics or 0, int(nics.group(1)))
            continue
        if line.startswith("#"):
            for pattern, action in (
                (_RANK, lambda m: ranks.add(int(m.group(1)))),
                (_COLLECTIVE, lambda m: setattr(table, "collective", m.group(1))),
                (_AVERAGE, lambda m: setattr(table, "average_busbw", float(m.group(1)))),
                (_OUT_OF_BOUNDS, lambda m: setattr(table, "out_of_bounds", int(m.group(1)))),
            ):
                match = pattern.match(line)
                if match:
                    action(match)
            continue
        row = parse_row(line)
        if row is not None:
            table.rows.append(row)
    if ranks:
        table.ranks, table.ranks_from = len(ranks), "header"
    else:
        derived = _ranks_from_busbw(table.rows)
        if derived is not None:
            table.ranks, table.ranks_from = derived, "busbw"
    return table
