"""The CLI face: verbs listed, usage errors are one line and exit 2."""
import json

from conftest import flagbench
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
