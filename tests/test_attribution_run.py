"""`flagbench run` gives every verdict its cause, and `--layout-check` its answer: real gcc builds,
real callgrind profiles, real timed runs (whose numbers are never asserted, only the causes that
do not depend on them).

The experiment is test_attribution.py's program as a micro bench (`loop(n)`, calling `step`
through a pointer), in four variants: the baseline; `layout` grows `unrelated` (before `loop`,
never called); `direct` adds 3 nops to the loop; `indirect` points `step` at another function.
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import flagbench_isolated as flagbench, write_experiment

from test_attribution import PROGRAM

pytestmark = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("valgrind")),
                                reason="needs gcc and valgrind")

SOURCE = PROGRAM[:PROGRAM.index("int main")]   # the harness has the main
TOML = """
sources = ["loop.c"]
targets = ["x86_64"]
compilers = ["gcc"]
cflags = ["{opt}"]
{extra}
[variants]
base = {{}}
layout = {{ defines = {{ UNRELATED = 41 }} }}
direct = {{ defines = {{ LOOP_EXTRA = 3 }} }}
indirect = {{ defines = {{ STEP = "fast_step" }} }}

[[bench]]
name = "loop"
kind = "micro"
function = "loop"
metrics = {metrics}
samples = 3
"""


def _experiment(root, opt="-O2", extra="", metrics='["time", "insns", "profile"]'):
    return write_experiment(root, TOML.format(opt=opt, extra=extra, metrics=metrics), {"loop.c": SOURCE})


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = _experiment(tmp_path_factory.mktemp("causes"))
    done = flagbench("run", root, "--db", root / "fb.db", cwd=root)
    assert done.returncode == 0, done.stderr
    return root, done.stdout


def _report(root, fmt: str) -> str:
    done = flagbench("report", "--db", root / "fb.db", "--format", fmt, cwd=root)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_each_counted_verdict_names_its_cause(measured):
    _, text = measured
    exact = text[text.index("loop · exact counts"):]
    assert "layout: cause: layout: no changed code ran; counts the same: not a regression" in exact
    assert "direct: cause: direct: loop +3; elsewhere +0, within the A/A floor 0\n" \
           "  changed code: loop +3 insns/iter" in exact
    assert "indirect: cause: indirect: no changed code ran; elsewhere -7, beyond the A/A floor 0" in exact


@pytest.mark.slow
def test_each_timed_verdict_gets_the_cause_of_its_counts(measured):
    _, text = measured
    timed = text[text.index("loop · ns_per_iter"):text.index("loop · exact counts")]
    for variant, kind in (("layout", "layout"), ("direct", "direct"), ("indirect", "indirect")):
        assert f"\n{variant}: cause: {kind}: " in timed


@pytest.mark.slow
def test_causes_in_json_md_and_html(measured):
    root, _ = measured
    doc = json.loads(_report(root, "json"))
    exact = next(t for t in doc["tables"] if t["exact"])
    kinds = {c["variant"]: c["cause"]["kind"] for c in exact["causes"]}
    assert kinds == {"layout": "layout", "direct": "direct", "indirect": "indirect"}
    direct = next(c for c in exact["causes"] if c["variant"] == "direct")["attribution"]
    assert direct["changed"] == [{"name": "loop", "old": direct["changed"][0]["old"],
                                  "new": direct["changed"][0]["old"] + 3, "delta": 3, "per_call": 3}]
    layout = next(c for c in exact["causes"] if c["variant"] == "layout")["attribution"]
    assert layout["changed_off_path"] == ["unrelated"] and layout["total_delta"] == 0
    md = _report(root, "md")
    assert "```\nlayout: cause: layout: no changed code ran; counts the same: not a regression\n" in md
    html = _report(root, "html")
    assert "\ndirect: cause: direct: loop +3; elsewhere +0, within the A/A floor 0\n" in html
    for out in (md, _report(root, "text")):
        causes = [line for line in out.splitlines() if "cause: " in line]
        assert len(causes) == 6 and all(len(line) < 100 for line in causes)


@pytest.mark.slow
def test_layout_check_says_what_survives_alignment(tmp_path):
    root = _experiment(tmp_path, metrics='["insns"]')
    done = flagbench("run", root, "--db", root / "fb.db", "--layout-check", cwd=root)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # counts: the planted instructions survive alignment; the layout variant moved nothing to begin with
    assert 'direct: cause: direct: loop (the bench\'s function) changed code; no per-symbol counts' in out
    assert "  layout check, 64-byte aligned: +15.79 % exact: survives alignment" in out
    assert "  layout check, 64-byte aligned: +0.00 % exact: no change either way" in out
    assert "base@align64" not in out   # its columns are the check's, not the table's


@pytest.mark.slow
def test_layout_check_under_Os_says_it_could_not_move_anything(tmp_path):
    root = _experiment(tmp_path, opt="-Os", extra="layout_check = true\n", metrics='["insns"]')
    done = flagbench("run", root, "--db", root / "fb.db", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "could not move anything" in done.stderr
    lines = [line for line in done.stdout.splitlines() if "layout check" in line]
    assert lines == ["  layout check: could not move anything (gcc ignores -falign-functions under -Os)"] * 3
    assert "survives" not in done.stdout


def test_layout_check_key_must_be_a_boolean(tmp_path):
    root = _experiment(tmp_path, extra='layout_check = "yes"\n')
    done = flagbench("run", root, "--db", root / "fb.db", cwd=root)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().endswith("layout_check must be true or false") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
