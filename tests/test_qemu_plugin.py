"""The qemu TCG plugin counts executed instructions and memory accesses exactly.

Real cross compilers build a tiny program whose hot loop is written in
assembler (so the loop is known), real qemu-user runs it with the plugin, and
the expected differences come from the program's own disassembly.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from flagbench.run.executors import QemuExecutor

# One iteration: a 1-, 2-, 4- and 8-byte load, the same four stores, decrement, branch.
AARCH64_SPIN = r"""
#include <stdlib.h>
__asm__(
"  .text\n  .globl spin\n  .type spin,%function\nspin:\n"
"1: ldrb w2, [x1]\n  ldrh w3, [x1]\n  ldr w4, [x1]\n  ldr x5, [x1]\n"
"  strb w2, [x1, #8]\n  strh w3, [x1, #8]\n  str w4, [x1, #8]\n  str x5, [x1, #8]\n"
"  subs x0, x0, #1\n  b.ne 1b\n  ret\n  .size spin, .-spin\n");
void spin(unsigned long n, void *buf);
static unsigned long long buf[4];
int main(int argc, char **argv) { spin(strtoul(argv[1], 0, 10), buf); return 0; }
"""

# Freestanding (no loongarch libc in Debian 12): our own _start reads argv from the stack.
LOONGARCH_SPIN = r"""
__asm__(
"  .text\n  .globl _start\n_start:\n  move $a0, $sp\n  bl cstart\n"
"  .globl spin\n  .type spin,@function\nspin:\n"
"1: ld.bu $t0, $a1, 0\n  ld.hu $t1, $a1, 0\n  ld.wu $t2, $a1, 0\n  ld.d $t3, $a1, 0\n"
"  st.b $t0, $a1, 8\n  st.h $t1, $a1, 8\n  st.w $t2, $a1, 8\n  st.d $t3, $a1, 8\n"
"  addi.d $a0, $a0, -1\n  bnez $a0, 1b\n  jr $ra\n  .size spin, .-spin\n");
void spin(unsigned long n, void *buf);
static unsigned long long buf[4];
static unsigned long parse(const char *s) {
  unsigned long v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + (unsigned long)(*s++ - '0');
  return v;
}
__attribute__((noreturn)) void cstart(long *sp) {
  spin(parse(((char **)(sp + 1))[1]), buf);
  register long a0 __asm__("$a0") = 0;
  register long a7 __asm__("$a7") = 93; /* exit */
  __asm__ volatile("syscall 0" : : "r"(a0), "r"(a7) : "memory");
  __builtin_unreachable();
}
"""

TARGETS = {
    "aarch64": dict(source=AARCH64_SPIN, qemu="qemu-aarch64",
                    cc=["aarch64-linux-gnu-gcc", "-O2", "-static"],
                    objdump=["aarch64-linux-gnu-objdump", "-d"],
                    packages="gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-multiarch"),
    "loongarch64": dict(source=LOONGARCH_SPIN, qemu="qemu-loongarch64",
                        cc=["clang-19", "--target=loongarch64-linux-gnu", "-mno-lsx", "-O2",
                            "-nostdlib", "-static", "-fuse-ld=lld"],
                        objdump=["llvm-objdump-19", "-d"], packages="clang-19 lld-19 llvm-19"),
}


def build(target: str, tmp_path: Path) -> Path:
    t = TARGETS[target]
    for tool in (t["cc"][0], t["objdump"][0], t["qemu"]):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} missing: apt-get install {t['packages']} qemu-user")
    src = tmp_path / f"spin_{target}.c"
    src.write_text(t["source"])
    exe = tmp_path / f"spin_{target}"
    subprocess.run([*t["cc"], "-o", str(exe), str(src)], check=True)
    return exe


def loop_length(target: str, exe: Path) -> int:
    """Instructions in spin's loop, from the disassembly: backward branch target .. branch."""
    text = subprocess.run([*TARGETS[target]["objdump"], str(exe)], check=True,
                          capture_output=True, text=True).stdout
    body = text.split("<spin>:", 1)[1].split("\n\n", 1)[0]
    start = int(re.search(r"^([0-9a-f]+) <spin>:", text, re.M).group(1), 16)
    insns = [(int(m.group(1), 16), m.group(2)) for m in
             re.finditer(r"^\s*([0-9a-f]+):\s+(.*)$", body, re.M)]
    for addr, line in insns:
        branch = re.search(r"<spin(?:\+0x([0-9a-f]+))?>", line)
        if branch:
            target_addr = start + int(branch.group(1) or "0", 16)
            return sum(1 for a, _ in insns if target_addr <= a <= addr)
    raise AssertionError(f"no backward branch in spin:\n{body}")


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_counts_exact_and_repeatable(target, tmp_path):
    exe = build(target, tmp_path)
    per_iteration = loop_length(target, exe)
    assert per_iteration == 10  # 8 memory ops + decrement + branch, as written above

    qemu = QemuExecutor(target)
    runs = [qemu.measure([str(exe), "2000"], target=target, timeout=60) for _ in range(3)]
    for run in runs:
        assert run.failure is None, run.stderr
    assert runs[0].metrics == runs[1].metrics == runs[2].metrics

    once = qemu.measure([str(exe), "1000"], target=target, timeout=60)  # same argv length
    twice = runs[0].metrics
    assert twice["insns"] - once.metrics["insns"] == 1000 * per_iteration
    for width in (1, 2, 4, 8):
        assert twice[f"loads_{width}"] - once.metrics[f"loads_{width}"] == 1000
        assert twice[f"stores_{width}"] - once.metrics[f"stores_{width}"] == 1000
    assert twice["loads_16"] == twice["stores_16"] == 0


def test_loongarch_freestanding_loads_are_the_programs_own(tmp_path):
    """Without libc, every 2- and 4-byte access is the loop's: the counts are N exactly."""
    exe = build("loongarch64", tmp_path)
    m = QemuExecutor("loongarch64").measure([str(exe), "777"], target="loongarch64").metrics
    assert m["loads_2"] == m["loads_4"] == m["stores_1"] == m["stores_2"] == m["stores_4"] == 777


def test_insns_only_mode_counts_the_same(tmp_path):
    exe = build("aarch64", tmp_path)
    with_mem = QemuExecutor("aarch64").measure([str(exe), "500"], target="aarch64")
    without = QemuExecutor("aarch64", count_memory=False).measure([str(exe), "500"], target="aarch64")
    assert without.metrics["insns"] == with_mem.metrics["insns"]
    assert "loads_1" not in without.metrics


def test_guest_crash_is_recorded_by_signal(tmp_path):
    if shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None:
        pytest.skip("apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user")
    src = tmp_path / "segv.c"
    src.write_text("int main(void) { *(volatile int *)0 = 1; return 0; }\n")
    exe = tmp_path / "segv"
    subprocess.run(["aarch64-linux-gnu-gcc", "-O1", "-static", "-o", str(exe), str(src)], check=True)
    m = QemuExecutor("aarch64").measure([str(exe)], target="aarch64")
    assert m.failure == "SIGSEGV"


def test_plugin_is_built_once_per_source(tmp_path, monkeypatch):
    from flagbench.run import qemu_plugin

    monkeypatch.setenv("FLAGBENCH_CACHE", str(tmp_path / "cache"))
    first = qemu_plugin.plugin_path()
    assert first.parent == tmp_path / "cache" / "plugins" and first.stat().st_size > 0
    stamp = first.stat().st_mtime_ns
    assert qemu_plugin.plugin_path() == first and first.stat().st_mtime_ns == stamp
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(first)], capture_output=True,
                             text=True, check=True).stdout.split()
    assert "qemu_plugin_install" in symbols and "qemu_plugin_version" in symbols
    assert "write_counts" not in symbols  # only the two entry points are exported


def test_libc_memcpy_stores_are_seen_on_aarch64(tmp_path):
    """glibc's memcpy must not hide its stores: on qemu's default -cpu max it picks the SVE
    copy, whose predicated accesses the 7.2 plugin API cannot see (0 stores per call)."""
    src = tmp_path / "copy.c"
    src.write_text("#include <stdlib.h>\n#include <string.h>\nchar a[64], b[64];\n"
                   "void *(*volatile cp)(void *, const void *, size_t) = memcpy;\n"
                   "int main(int c, char **v) { for (long i = atol(v[1]); i > 0; i--) cp(a + 1, b + 3, 8); return 0; }\n")
    exe = tmp_path / "copy"
    subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-static", "-o", str(exe), str(src)], check=True)
    small, large = (QemuExecutor("aarch64").measure([str(exe), n], target="aarch64").metrics for n in ("100", "200"))
    stored = sum(int(w) * (large[f"stores_{w}"] - small[f"stores_{w}"]) for w in ("1", "2", "4", "8", "16"))
    assert stored / 100 >= 8      # an 8-byte copy stores at least 8 bytes
