"""The README's tour works as written: each of its `$ flagbench ...` blocks on a bundled case
(`cases/`) is run as a newcomer runs it, from the repository's top, and every line the README
shows comes out, in order (a `...` line stands for lines left out). The series, bisect and watch
blocks run on repositories the tests make (tests/test_series.py, test_bisect.py, test_watch.py),
so they are not run here."""
from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT, flagbench

FENCE = re.compile(r"^```\n(\$ flagbench .*?)^```", re.M | re.S)
# what moves from run to run in a shown line: a time taken, a run's number and date, a timed row
# (its medians, interval and verdict) and the rule under a table, as wide as the medians
VARIES = re.compile(r"modelled in [\d.]+ s|\d+(\.\d+)? s\)|^run \d+ ·| p=\d|^ ─+$|is better\)$")


def tour_blocks() -> list[tuple[str, list[str]]]:
    out = []
    for block in FENCE.findall((ROOT / "README.md").read_text()):
        command, *shown = block.rstrip("\n").split("\n")
        if " cases/" in command:
            out.append((command[2:], shown))
    return out


def test_the_tour_has_blocks_on_bundled_cases():
    commands = [c.split()[1] for c, _ in tour_blocks()]
    assert {"size", "asm", "run", "model"} <= set(commands), commands


@pytest.mark.slow
@pytest.mark.parametrize("command,shown", tour_blocks(), ids=lambda v: v.split()[1] if isinstance(v, str) else "")
def test_a_tour_block_prints_what_the_readme_shows(command, shown, module_cache, tmp_path):
    argv = shlex.split(command)[1:]
    if argv[0] == "run":
        argv += ["--db", str(tmp_path / "tour.db")]    # the README's run, not one resumed from another test
    r = flagbench(*argv, cwd=ROOT, cache=module_cache, timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    printed = [line.rstrip() for line in r.stdout.splitlines()]
    at = 0
    for line in shown:
        if line.strip() == "..." or VARIES.search(line):
            continue
        try:
            at = printed.index(line.rstrip(), at) + 1
        except ValueError:
            pytest.fail(f"`{command}` did not print (in this order) the README's line:\n{line}\n"
                        f"--- it printed:\n{r.stdout[-3000:]}")
