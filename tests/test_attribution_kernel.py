"""The kernel guest's counts attributed, on the suite's own test kernel (tests/kernel_util.py: no
kernel build of its own): `default` against `patched`, which adds one nop to strncpy (lib/string.c),
a function the guest bench prctl_name (20,000 PR_GET_NAME calls: __get_task_comm) never runs.

Measured as `flagbench run` measures a guest bench (guest cells, the engine, the store, the
report), with the changed functions found by comparing the two vmlinux files. The A/A floor is
the baseline booted a second time with one more ignored command-line word. The commit grows a
function off the bench's path: whatever the total did, the cause must say so, with strncpy named
as changed code the bench did not run and the count's move compared with that floor.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import bench

KERNEL_DATA = Path(__file__).resolve().parent / "data" / "kernel"


@pytest.mark.slow
def test_a_commit_off_the_bench_path_is_attributed_elsewhere(tmp_path):
    from kernel_util import build_test_kernels   # cached, file-locked: the builds test_kernel_build makes

    from flagbench.causes import CHANGED_KEY, changed_by_cell
    from flagbench.report import report_run
    from flagbench.run.engine import run_cells
    from flagbench.run.guest import boot as boots, guest
    from flagbench.store import Store

    kernels = build_test_kernels(("default", "patched"))
    assert all(k.ok for k in kernels.values()), [k.error for k in kernels.values()]
    shutil.copy(KERNEL_DATA / "prctl_name.c", tmp_path)
    prctl = bench({"name": "prctl_name", "kind": "command", "guest": True, "command": ["prctl_name.c"]},
                  root=tmp_path)
    builds = [kernels["default"], kernels["patched"]]
    changed = changed_by_cell(builds, ["default", "patched"])
    assert changed == {"patched/x86_64/gcc": ["strncpy"]}   # one function's code: the nop's
    notes: list[str] = []
    cells = guest.guest_cells(SimpleNamespace(root=tmp_path), [prctl], builds, workdir=tmp_path / "work",
                              notes=notes, settings=boots.BootSettings(timeout=300))
    with Store(tmp_path / "fb.db") as store, store.writer("test"):
        outcome = run_cells(store, cells, experiment="kernel-causes", experiment_hash="k" * 64,
                            provenance={"variants": ["default", "patched"], CHANGED_KEY: changed}, progress=False)
        assert outcome.status == 0
        text = report_run(store, outcome.run_id, "text")
        doc = json.loads(report_run(store, outcome.run_id, "json"))
    floor_notes = [n for n in notes if n.startswith("A/A noise floor")]
    assert len(floor_notes) == 1
    exact = next(t for t in doc["tables"] if t["bench"] == "prctl_name" and t["exact"])
    [found] = [c for c in exact["causes"] if c["params"]["count"] == "kernel_insns_per_iter"]
    a = found["attribution"]
    assert a["changed"] == [] and a["changed_off_path"] == ["strncpy"]
    assert a["floor"] is not None and a["floor"] >= 0
    assert a["elsewhere_delta"] == a["total_delta"]      # nothing is carried by changed code
    kind = found["cause"]["kind"]
    assert kind == ("layout" if abs(a["total_delta"]) <= a["floor"] else "indirect")
    assert kind == "layout", f"the off-path commit moved the count beyond the A/A floor: {found['cause']['line']}"
    assert found["cause"]["regression"] is False
    assert "patched: cause: layout: no changed code ran" not in text   # one compared variant: no prefix
    line = next(line for line in text.splitlines() if line.startswith("cause: layout: "))
    assert "within the A/A floor" in line or "counts the same" in line
    assert any(line.startswith("A/A floor ") and "kernel insns/iter: the baseline booted twice" in line
               for line in text.splitlines())
