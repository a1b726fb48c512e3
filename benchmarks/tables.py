"""Plain-text tables shared by the benchmark scripts."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """An aligned plain-text table: first column left-aligned, the others right-aligned.

    Floats are shown with two decimals when below 10, else one; other cells with `str`.
    """

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
        return str(value)

    cells = [[cell(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        first, *rest = values
        right = [v.rjust(w) for v, w in zip(rest, widths[1:], strict=True)]
        return "  ".join([first.ljust(widths[0]), *right]).rstrip()

    print(f"\n{title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))
    sys.stdout.flush()
