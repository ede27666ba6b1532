"""`flagbench size`: bloat-o-meter's table byte for byte (`bom`), and what it cannot see
(`compare`, then `render` as text, md, json or csv).

rules: bloat-o-meter's rules and table (the leaf); symbols: one input's names, sizes, footprints
and sections through the one reader; table: the two sides' table; pair: both inputs read at
once; measure: paths to tables; render: the formats.
"""
from flagbench.size.measure import SizeComparison, bom, compare  # noqa: F401
from flagbench.size.rules import BOM_TABLES, DEFAULT_TYPES, SYMBOL_KINDS  # noqa: F401


def __getattr__(name: str):
    """`render` (the function) and `FORMATS` on first use: --format=bom has no need of them. (Once
    the submodule is imported elsewhere, `flagbench.size.render` is the module: import the function
    from it, as cli/size.py does.)"""
    if name in ("render", "FORMATS"):
        import importlib
        return getattr(importlib.import_module("flagbench.size.render"), name)
    raise AttributeError(f"module 'flagbench.size' has no attribute {name!r}")
