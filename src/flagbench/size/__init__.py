"""`flagbench size`: bloat-o-meter's table byte for byte (`bom`), and what it cannot see
(`compare`, then `render` as text, md, json or csv).

rules: bloat-o-meter's rules and table (the leaf); symbols: one input's names, sizes, footprints
and sections through the one reader; table: the two sides' table; pair: both inputs read at
once; measure: paths to tables; render: the formats.
"""
from flagbench.size.measure import SizeComparison, bom, compare  # noqa: F401
from flagbench.size.rules import BOM_TABLES, DEFAULT_TYPES, SYMBOL_KINDS  # noqa: F401


def __getattr__(name: str):
    """`FORMATS` on first use: --format=bom has no need of `render` (import the function from
    flagbench.size.render: `flagbench.size.render` is that module)."""
    if name == "FORMATS":
        from flagbench.size.render import FORMATS
        return FORMATS
    raise AttributeError(f"module 'flagbench.size' has no attribute {name!r}")
