"""`flagbench profile`: exact per-symbol profiles that add up to the count `flagbench run` measures.

One small experiment (a loop calling a helper, the helper doing 3 or 11 more adds per call by
variant), four targets with clang: x86_64 under callgrind, aarch64, riscv64 and loongarch64 under
qemu with the plugin. `flagbench run` measures insns_per_iter the usual way; `flagbench profile
--format json` must give, per cell, symbols whose selves add up to its total, and that total must
be exactly the run's count.
"""
from __future__ import annotations

import json
import textwrap

import pytest
from conftest import flagbench_isolated as flagbench

from flagbench import profile
from flagbench.profile import Profile, base_name, diff

TARGETS = ["x86_64", "aarch64", "riscv64", "loongarch64"]
LOOP_C = r"""
#include <stdint.h>
__attribute__((noinline)) uint64_t helper(uint64_t x)
{
    __asm__ volatile(".rept " XSTR(WORK) "\n\tnop\n\t.endr");
    return x * 7 + 3;
}
uint64_t loop(uint64_t n)
{
    uint64_t acc = 1;
    for (uint64_t i = 0; i < n; i++)
        acc = helper(acc + i);
    return acc;
}
"""


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    (root / "loop.c").write_text("#define STR(x) #x\n#define XSTR(x) STR(x)\n" + LOOP_C)
    (root / "experiment.toml").write_text(textwrap.dedent(f"""
        sources = ["loop.c"]
        targets = {json.dumps(TARGETS)}
        compilers = ["clang"]
        cflags = ["-O2"]

        [variants]
        few = {{ defines = {{ WORK = 3 }} }}
        many = {{ defines = {{ WORK = 11 }} }}

        [[bench]]
        name = "loop"
        kind = "micro"
        function = "loop"
        metrics = ["insns", "profile"]
        """))
    db = root / "fb.db"
    done = flagbench("run", str(root), "--db", str(db), "--format", "json", cwd=root)
    assert done.returncode == 0, done.stderr
    counts = {}
    for t in json.loads(done.stdout)["tables"]:
        for r in t["rows"]:
            if r["params"].get("count") == "insns_per_iter":
                for variant, v in r["variants"].items():
                    counts[(t["target"], variant)] = v["median"]
    done = flagbench("profile", str(root), "--db", str(db), "--format", "json", cwd=root)
    assert done.returncode == 0, done.stderr
    return root, db, counts, json.loads(done.stdout)


@pytest.mark.slow
def test_profiles_of_a_real_run(measured):
    """One test over the one measured experiment (pytest-xdist would otherwise measure it per worker)."""
    _self_counts_add_up_to_the_count_run_measures(measured)
    _the_extra_nops_land_in_the_helper(measured)
    _perf_time_profile_or_a_note(measured)
    _stored_profiles_print_without_measuring_and_every_format(measured)


def _self_counts_add_up_to_the_count_run_measures(measured):
    """The sum test: per cell, the selves add up to the total, and the total is the run's count."""
    _, _, counts, doc = measured
    exact = [p for p in doc["profiles"] if p["exact"]]
    assert {(p["target"], p["variant"]) for p in exact} == {(t, v) for t in TARGETS for v in ("few", "many")}
    for p in exact:
        assert p["source"] == ("callgrind" if p["target"] == "x86_64" else "qemu-plugin")
        assert sum(s["self"] for s in p["symbols"]) == pytest.approx(p["total"], abs=1e-9), p
        assert p["total"] == counts[(p["target"], p["variant"])], p      # exact: the same number
        names = {s["name"]: s["self"] for s in p["symbols"]}
        assert set(names) == {"loop", "helper"}, names                    # start-up code cancels out


def _the_extra_nops_land_in_the_helper(measured):
    _, _, _, doc = measured
    exact = {(p["target"], p["variant"]): {s["name"]: s["self"] for s in p["symbols"]}
             for p in doc["profiles"] if p["exact"]}
    for target in TARGETS:
        few, many = exact[(target, "few")], exact[(target, "many")]
        assert many["helper"] - few["helper"] == 8 and many["loop"] == few["loop"], (target, few, many)


def _perf_time_profile_or_a_note(measured):
    _, _, _, doc = measured
    timed = [p for p in doc["profiles"] if p["source"] == "perf"]
    if not timed:
        assert any("perf" in n for n in doc["notes"])
        return
    for p in timed:
        assert not p["exact"] and p["target"] == "x86_64" and p["total"] > 0
        assert sum(s["self"] for s in p["symbols"]) == p["total"]
        top = p["symbols"][0]["name"]
        assert top in ("helper", "loop")          # the program spends its time in the loop


def _stored_profiles_print_without_measuring_and_every_format(measured):
    root, db, _, doc = measured
    again = flagbench("profile", str(root), "--db", str(db), "--format", "json", "--no-perf", cwd=root)
    assert again.returncode == 0 and "profile of" not in again.stderr     # nothing measured
    assert [p for p in json.loads(again.stdout)["profiles"] if p["exact"]] == [p for p in doc["profiles"] if p["exact"]]
    text = flagbench("profile", str(root), "--db", str(db), "--no-perf", cwd=root).stdout
    assert "loop · profile, exact, qemu-plugin · riscv64/clang: many vs few" in text and "helper" in text
    md = flagbench("profile", str(root), "--db", str(db), "--format", "md", "--no-perf", cwd=root).stdout
    assert "| helper" in md
    report = json.loads(flagbench("report", "--db", str(db), "--format", "json", cwd=root).stdout)
    assert [p for p in report["profiles"] if p["exact"]] == [p for p in doc["profiles"] if p["exact"]]
    assert "profile, exact, callgrind · x86_64/clang" in flagbench("report", "--db", str(db), "--format", "md", cwd=root).stdout
    csv_out = flagbench("profile", str(root), "--db", str(db), "--format", "csv", "--no-perf", cwd=root).stdout
    assert csv_out.splitlines()[0].startswith("bench,target,compiler,variant,source,exact,total,symbol,self")


def test_bad_input_is_one_line(tmp_path):
    out = flagbench("profile", str(tmp_path / "nothing"), cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_renamed_functions_are_grouped_by_base_name():
    old = Profile("b", "x86_64", "gcc", "a", True, "callgrind", 10, {"f": 6, "g": 4})
    new = Profile("b", "x86_64", "gcc", "b", True, "callgrind", 12, {"f.constprop.0": 5, "f.cold": 1, "g": 6})
    rows = {r.name: r for r in diff(old, new)}
    assert set(rows) == {"f", "g"}
    assert rows["f"].old == 6 and rows["f"].new == 6 and rows["f"].suffixes == (".cold", ".constprop.0")
    assert base_name("x.part.1.isra.0") == ("x", ".part.1.isra.0")


def test_profiles_are_written_under_the_stores_writer_lock(tmp_path):
    """`flagbench profile` writes the results database like `flagbench run`: through the store,
    as its one writer; a second writer is refused before anything is built."""
    import sqlite3

    from flagbench.store import SCHEMA_VERSION, Store

    (tmp_path / "loop.c").write_text("#define STR(x) #x\n#define XSTR(x) STR(x)\n" + LOOP_C)
    (tmp_path / "experiment.toml").write_text(textwrap.dedent("""
        sources = ["loop.c"]
        compilers = ["gcc"]
        [variants]
        few = { defines = { WORK = 1 } }
        many = { defines = { WORK = 2 } }
        [[bench]]
        name = "loop"
        kind = "micro"
        function = "loop"
        count_iters = 100
        """))
    db = tmp_path / "fb.db"
    with Store(db) as holder, holder.writer("flagbench run elsewhere"):
        done = flagbench("profile", str(tmp_path), "--db", str(db), "--no-perf", cwd=tmp_path)
        assert done.returncode == 2 and "is being written by" in done.stderr, done.stderr
        assert "cc " not in done.stderr                    # refused before building
    done = flagbench("profile", str(tmp_path), "--db", str(db), "--no-perf", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("SELECT count(*) FROM profiles").fetchone()[0] == 2   # few and many, callgrind
    raw.close()
    with Store(db, create=False) as store:
        kept = store.profiles(store.runs()[0]["experiment_hash"]) if store.runs() else None
    assert kept is None   # `profile` starts no run: its profiles are keyed by the experiment alone
