"""Bad input that once gave a traceback (issue 31): each is one line on stderr and exit 2,
and `report NAME` reads the store, never builds. Real builds, real runs, a real store."""
from __future__ import annotations

import os
import sqlite3
import textwrap
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment

MICRO = {"f.c": "unsigned long f(unsigned long n) { unsigned long a = 1; "
                "for (unsigned long j = 0; j < n; j++) a = a * 3 + j; return a; }\n"}
TOML = """
    sources = ["f.c"]
    targets = ["x86_64"]
    [variants]
    base = {}
    [[bench]]
    name = "f"
    kind = "micro"
    function = "f"
    metrics = ["time"]
    samples = 2
    """


def one_line(done, *words: str) -> None:
    """Exit 2, no traceback, the last stderr line names WORDS (progress lines may come before it)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), done.stderr


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """An experiment and a database holding one finished run of it."""
    root = tmp_path_factory.mktemp("stored")
    exp = write_experiment(root / "exp", TOML, MICRO)
    done = flagbench("run", exp, "--db", root / "fb.db", cwd=root, cache=Path(os.environ.get("FLAGBENCH_CACHE", root / "c")))
    assert done.returncode == 0, done.stderr
    return root, exp


@pytest.mark.parametrize("table, field, value, says", [
    ("samples", "contention", "'x'", "contention"),
    ("samples", "sample", "'seven'", "sample"),
    ("runs", "hosts", "5", "hosts"),
    ("runs", "variants", "'base'", "variants"),
])
def test_provenance_of_the_wrong_type_is_a_damaged_store(stored, tmp_path, table, field, value, says):
    root, exp = stored
    db = tmp_path / "fb.db"
    db.write_bytes((root / "fb.db").read_bytes())
    with sqlite3.connect(db) as con:
        con.execute(f"UPDATE {table} SET provenance = json_set(provenance, '$.{field}', {value})")
    one_line(flagbench("report", "--db", db, cwd=tmp_path), "edited by hand", says)
    one_line(flagbench("run", exp, "--db", db, cwd=tmp_path), "edited by hand", says)


def test_cpu_beyond_this_machine_is_one_line(stored, tmp_path):
    _, exp = stored
    n = os.cpu_count()
    one_line(flagbench("run", exp, "--db", tmp_path / "fb.db", "--cpu", n, cwd=tmp_path), f"--cpu {n}", "CPUs")


@pytest.mark.parametrize("bench, says", [
    ('name = "k"\nkind = [1]\nfunction = "f"', "kind"),
    ('name = "w"\nkind = "wis"\ntestcase = "\\u0000"', "testcase"),
    ('name = "a\\u0000b"\nkind = "micro"\nfunction = "f"', "bench name"),
    ('name = "a\\nb"\nkind = "micro"\nfunction = "f"', "bench name"),
])
def test_bad_bench_values_are_one_line_at_their_line(tmp_path, bench, says):
    exp = write_experiment(tmp_path / "exp", TOML.replace('name = "f"\n    kind = "micro"\n    function = "f"',
                                                         textwrap.indent(bench, "    ").lstrip()), MICRO)
    done = flagbench("run", exp, "--db", tmp_path / "fb.db", cwd=tmp_path)
    one_line(done, "experiment.toml:", says)
    assert done.stderr.count("\n") == 1


def test_report_of_a_name_reads_the_store_even_when_a_directory_has_that_name(stored, tmp_path):
    """`report exp` names the stored experiment `exp`: a directory ./exp here is not built or run."""
    root, exp = stored
    done = flagbench("report", "exp", "--db", root / "fb.db", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "flagbench report: " not in done.stderr and not (root / "exp" / "flagbench.db").exists()
    assert "cc base" not in done.stderr
    other = tmp_path / "exp"
    write_experiment(other, TOML.replace('name = "f"', 'name = "g"'), MICRO)
    missing = flagbench("report", "exp", "--db", tmp_path / "none.db", cwd=tmp_path)
    assert missing.returncode == 2 and "cc base" not in missing.stderr, missing.stderr
    assert not (tmp_path / "none.db").exists()
