"""How a table column (a stored cell's variant) names a variant built or linked another way, for
the stages that build, measure and report it alike: `V@L3` is V relinked in layout 3
(run/layout.py), `V@align64` is V built again with every function aligned to ALIGN bytes (the
layout check: subject.py builds it), `V+fn` a memcpy-like bench's function fn of V.

>>> layout_column("default", 3), split_layout_column("default@L3"), split_layout_column("O2")
('default@L3', ('default', 3), None)
>>> aligned_column("base"), aligned_column("new+memcpy_v2"), split_aligned_column("new@align64+memcpy_v2")
('base@align64', 'new@align64+memcpy_v2', 'new+memcpy_v2')
"""
from __future__ import annotations

import re

ALIGN = 64                                  # the layout check's function alignment
ALIGN_FLAG = f"-falign-functions={ALIGN}"
ALIGN_SUFFIX = f"@align{ALIGN}"
_LAYOUT = re.compile(r"^(?P<variant>.+)@L(?P<index>\d+)$")


def layout_column(variant: str, index: int) -> str:
    """The table column (and stored cell variant) of a variant's relink."""
    return f"{variant}@L{index}"


def split_layout_column(column: str) -> tuple[str, int] | None:
    m = _LAYOUT.match(column)
    return (m["variant"], int(m["index"])) if m else None


def aligned_column(column: str) -> str:
    """The column of a variant (or a memcpy-like `variant+function` column) built aligned."""
    variant, plus, function = column.partition("+")
    return f"{variant}{ALIGN_SUFFIX}{plus}{function}"


def split_aligned_column(column: str) -> str | None:
    """The plain column of an aligned one, None for any other column."""
    variant, plus, function = column.partition("+")
    if not variant.endswith(ALIGN_SUFFIX):
        return None
    return variant[:-len(ALIGN_SUFFIX)] + plus + function
