"""Small SVG charts for the benchmark results (docs/results.md), written without a plotting library.

A horizontal bar chart is all the results need: one bar per row (a framework, a mode), its share printed at
its end. The SVG is plain text, so it diffs, and renders on GitHub and in any browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

_ROW = 26  # pixels per bar
_LABEL = 150  # the labels' column
_BAR = 360  # the longest bar (100%)
_TOP = 40  # the title's band


def bar_chart(title: str, rows: Sequence[tuple[str, float]], note: str = "") -> str:
    """An SVG of one bar per ``(label, share)`` row (share from 0 to 1), the share as a percentage after it."""
    height = _TOP + _ROW * len(rows) + (34 if note else 14)
    width = _LABEL + _BAR + 70
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for index, (label, share) in enumerate(rows):
        share = min(max(share, 0.0), 1.0)
        y = _TOP + index * _ROW
        length = round(_BAR * share, 1)
        parts += [
            f'<text x="{_LABEL - 8}" y="{y + 17}" text-anchor="end">{escape(label)}</text>',
            f'<rect x="{_LABEL}" y="{y + 4}" width="{_BAR}" height="{_ROW - 8}" fill="#eeeeee"/>',
            f'<rect x="{_LABEL}" y="{y + 4}" width="{length}" height="{_ROW - 8}" fill="#3b7dd8"/>',
            f'<text x="{_LABEL + _BAR + 8}" y="{y + 17}">{share * 100:.0f}%</text>',
        ]
    if note:
        parts.append(f'<text x="10" y="{height - 12}" font-size="11" fill="#555555">{escape(note)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
