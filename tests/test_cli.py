"""The CLI face: verbs listed, usage errors are one line and exit 2; the process's end."""
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, flagbench
from flagbench.cli import VERBS


def test_help_lists_every_verb():
    out = flagbench("--help")
    assert out.returncode == 0
    for verb in VERBS:
        assert verb in out.stdout


def test_unknown_verb_is_one_line_exit_2():
    out = flagbench("frobnicate")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_doctor_reports_every_target_and_host_compiler():
    out = flagbench("doctor", "--format", "json")
    assert out.returncode == 0
    rows = {r["target"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"x86_64", "aarch64", "arm", "riscv64", "loongarch64", "hppa", "hppa64"}
    assert rows["x86_64"]["present"]["gcc"]  # the host compiler is always installed by make
    assert rows["loongarch64"]["tools"]["gcc"] is None  # no loongarch gcc in Debian 12
    assert rows["loongarch64"]["tools"]["objdump"] == "llvm-objdump-19"


# process_main as the process: a module-level object whose __del__ speaks at the interpreter's
# teardown, an atexit callback, a thread still running; then a verb.
_AT_EXIT = """
import atexit, sys, threading, time
class Loud:
    def __del__(self):
        print("teardown ran", flush=True)
loud = Loud()
if "{extra}" == "atexit":
    atexit.register(print, "atexit ran")
if "{extra}" == "thread":
    threading.Thread(target=lambda: (time.sleep(0.5), print("thread ran", flush=True))).start()
sys.argv = ["flagbench", *{argv!r}]
from flagbench.cli import process_main
process_main()
"""


def _process_main(argv: list[str], extra: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _AT_EXIT.format(argv=argv, extra=extra)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)


def test_size_ends_without_the_teardown_its_output_and_status_whole(tmp_path):
    """After size the process ends at once (no __del__ at teardown), with everything it printed
    on both streams and its exit status; a verb not in NO_TEARDOWN gets the teardown."""
    obj = tmp_path / "a.o"
    subprocess.run(["gcc", "-c", "-x", "c", "-o", obj, "-"], input="int f(int x) { return x * 3; }\n",
                   text=True, check=True)
    out = _process_main(["size", str(obj), str(obj)])
    assert out.returncode == 0 and "teardown ran" not in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].startswith("code ")   # its last line is there
    bad = _process_main(["size", str(tmp_path / "none.o"), str(obj)])
    assert bad.returncode == 2 and "teardown ran" not in bad.stdout
    assert bad.stderr.strip() == f"flagbench size: {tmp_path / 'none.o'}: no such file"
    other = _process_main(["report", "--no-such-option"])
    assert other.returncode == 2 and "teardown ran" in other.stdout


@pytest.mark.parametrize("extra", ["atexit", "thread"])
def test_size_waits_for_atexit_callbacks_and_threads(tmp_path, extra):
    obj = tmp_path / "a.o"
    subprocess.run(["gcc", "-c", "-x", "c", "-o", obj, "-"], input="int f(void) { return 1; }\n", text=True,
                   check=True)
    out = _process_main(["size", str(obj), str(obj)], extra)
    assert out.returncode == 0
    assert f"{extra} ran" in out.stdout and "teardown ran" in out.stdout
