"""`flagbench report` (not built yet)."""
from __future__ import annotations

from flagbench.errors import UserError


def register(sub):
    return sub.add_parser("report", help="(not built yet)")


def run(args) -> int:
    raise UserError("not built yet")
