"""`flagbench size A B --format=bom --bom-rules VERSION` on two plain files (issue 44): byte for byte
what that kernel version's scripts/bloat-o-meter prints. Oracles: Linux 6.1's script
(.cache/bloat-o-meter, scripts/install-deps) and the same with upstream's weak-symbol change (the
rules of 6.12's script, test_size.oracle's `current`), on objects with weak functions and data."""
from __future__ import annotations

import subprocess
import sys

import pytest

from test_size import DATA, cc, oracle


def size(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flagbench", "size", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def weak_pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bom-rules")
    return (cc(tmp, "x86_64", "gcc", DATA / "kinds.c", tmp / "old.o", ("-O1",)),
            cc(tmp, "x86_64", "gcc", DATA / "kinds.c", tmp / "new.o", ("-O2",)))


@pytest.mark.parametrize("mode", [None, "-c", "-d", "-t"])
def test_files_follow_the_script_of_the_version_asked_for(tmp_path, weak_pair, mode):
    flags = [mode] if mode else []
    old61 = oracle(tmp_path, *flags, *weak_pair)
    newest = oracle(tmp_path, *flags, *weak_pair, current=True)
    for rules, want in (("6.1", old61), ("6.12", newest), ("newest", newest)):
        done = size(*flags, "--format=bom", "--bom-rules", rules, *weak_pair)
        assert done.returncode == 0 and done.stdout == want, (rules, done.stderr, done.stdout, want)
    assert size(*flags, "--format=bom", *weak_pair).stdout == newest       # the default: the newest


def test_the_versions_differ_where_weak_symbols_are(tmp_path, weak_pair):
    """Not a vacuous pass: the pair's weak symbols make 6.1's totals other than the newest's."""
    assert oracle(tmp_path, *weak_pair).splitlines()[-1] != oracle(tmp_path, *weak_pair, current=True).splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (("--format=bom", "--bom-rules", "tree"), "--bom-rules tree: two files have no kernel tree; give the version"),
    (("--bom-rules", "6.1"), "--bom-rules 6.1 goes with --format=bom for two files"),
])
def test_rules_files_cannot_take_are_one_line(weak_pair, args, message):
    done = size(*args, *weak_pair)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_help_says_which_script_exactly_means():
    out = size("--help").stdout
    text = " ".join(out.split())
    assert "newest script's rules (Linux 6.12's, weak symbols w/W/v/V counted)" in text, text
    assert "--bom-rules 6.1 (the script scripts/install-deps puts in .cache/bloat-o-meter)" in text, text
