"""The one Markdown table writer (pandas' ``to_markdown``, i.e. tabulate's pipe tables), for every page, block and
report the project writes: the rendered tables, docs/measured.md's generated blocks, the claims table, the jobs'
times, the ingredients table."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def _cell(x: object) -> str:
    """A cell as text that cannot break its row: ``|`` escaped, newlines made spaces."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    table: pd.DataFrame | Sequence[Sequence[object]],
    columns: Sequence[str] | None = None,
    *,
    floatfmt: str | None = None,
) -> str:
    """``table`` (a DataFrame, or rows under ``columns``) as a Markdown pipe table, without its index.

    ``floatfmt`` None: every cell printed as its text, none re-read as a number (a seed of "01" stays "01", a
    version "2.10" stays "2.10"). A format such as ``".3g"`` or ``"g"``: numbers (and number-like text) formatted
    with it and right-aligned, as in the rendered pages' tables."""
    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table), columns=list(columns or ()))
    if floatfmt is None:
        text = pd.DataFrame(
            [[_cell(x) for x in row] for row in df.itertuples(index=False)], columns=df.columns
        )
        return text.to_markdown(index=False, disable_numparse=True)
    return df.to_markdown(index=False, floatfmt=floatfmt)
