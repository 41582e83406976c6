"""Tables printed whole: numbers are never cut to an ellipsis.

A console that is not a terminal (CI logs, a pipe, ``> file``) is 80 columns to rich, and a table
wider than that has its cells cut (``12.…`` $/h, ``1024…`` requests). print_table prints such a
table at the width it needs instead; in a terminal the terminal's width stands (the reader can
widen it) - rich then shrinks the prose columns first.
"""

from __future__ import annotations

# Widest a table is printed at to show every cell on one line; beyond it (a prose column such as
# --explain's reasons) the table gets the width where no word is cut and prose wraps.
MAX_WIDTH = 200


def print_table(console, table) -> None:
    """Print ``table`` (a rich renderable) on ``console``; when the console is not a terminal and
    the table needs more than its width, at the width the table needs: every cell on one line
    when that is at most MAX_WIDTH columns, else the narrowest width that cuts no word (rich's
    minimum measurement). The console's width is restored afterwards. Units: columns."""
    if console.is_terminal:
        console.print(table)
        return
    m = console.measure(table, options=console.options.update(max_width=10 * MAX_WIDTH))
    need = m.maximum if m.maximum <= MAX_WIDTH else m.minimum
    width = console.width
    if need <= width:
        console.print(table)
        return
    console.width = need
    try:
        console.print(table)
    finally:
        console.width = width
