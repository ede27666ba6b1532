"""The model (flagbench/model/) with its real parts: the bbcount and cachesim plugins under
qemu-user, programs built by the cross compilers, llvm-mc-19 and llvm-mca-19.

Expected values come from elsewhere than the code under test: the insncount plugin's exact
count, llvm-mca's own text output read here, and access patterns whose misses follow from
the cache geometry.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment

LOOP_C = r"""
#include <stdlib.h>
volatile unsigned long sink;
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10), s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += i * 3 ^ (s >> 2);
	sink = s;
	return 0;
}
"""

# Reads one byte of each 64-byte line of a 128 KB array per pass; and, per pass, one 8-byte
# load from an address 1 past a multiple of 8.
SCAN_C = r"""
#include <stdlib.h>
#include <string.h>
static unsigned char buf[128 * 1024] __attribute__((aligned(4096)));
static unsigned char odd[64] __attribute__((aligned(64)));
unsigned char *volatile odd_one = &odd[1];
volatile unsigned long sink;
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10), s = 0;
	for (unsigned long p = 0; p < n; p++) {
		for (unsigned long i = 0; i < sizeof buf; i += 64)
			s += *(volatile unsigned char *)&buf[i];
		unsigned long w;
		memcpy(&w, odd_one, 8);
		s += w;
	}
	sink = s;
	return 0;
}
"""


def _build(tmp: Path, name: str, source: str, cc: str = "aarch64-linux-gnu-gcc") -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    exe = tmp / name
    subprocess.run([cc, "-O2", "-static", "-o", str(exe), str(src)], check=True)
    return exe


@pytest.mark.parametrize("target,cc", [("aarch64", "aarch64-linux-gnu-gcc"), ("riscv64", "riscv64-linux-gnu-gcc"),
                                       ("arm", "arm-linux-gnueabihf-gcc")])
def test_block_counts_add_up_to_the_insncount_plugins_exact_count(tmp_path, module_cache, target, cc):
    from flagbench.model.blocks import block_counts
    from flagbench.run.executors import QemuExecutor
    from flagbench.run.qemu_plugin import plugin_path
    exe = _build(tmp_path, "loop", LOOP_C, cc)
    argv = [str(exe), "5000"]
    total, blocks = block_counts(target, plugin_path("bbcount"), argv, tmp_path, 60, "t")
    exact = QemuExecutor(target, count_memory=False).measure(argv, target=target)
    assert exact.ok, exact.failure
    summed = sum(len(sizes) * count for sizes, count in blocks.values())
    assert summed == total == exact.metrics["insns"]
    # the loop's body is a block that ran (about) 5000 times
    assert any(4990 <= count <= 5001 for _, count in blocks.values())


def test_per_iteration_blocks_and_the_hand_priced_hot_block(tmp_path, module_cache):
    """n and 2n differenced: the loop body runs once per iteration; its cycles, from
    llvm-mca's own text output for its text, are what the model priced."""
    from flagbench.model import mca
    from flagbench.model.band import model_side
    from flagbench.model.cores import CORES
    exe = _build(tmp_path, "loop", LOOP_C)
    cores = CORES["aarch64"]
    side = model_side("A", "aarch64", exe, lambda k: [str(exe), str(k)], 1000, cores, tmp_path, 60, cache=False)
    hot = side.blocks[0]
    assert hot.per_iter == 1.0 and hot.symbol == "main"
    assert side.insns == sum(b.per_iter * b.insns for b in side.blocks)
    for core in cores:
        text = side.asm[0]
        asm = tmp_path / "hot.s"
        asm.write_text("\n".join(text) + "\n")
        out = subprocess.run(["llvm-mca-19", "-mtriple=aarch64-linux-gnu", f"-mcpu={core.mcpu}", "-mattr=+v8.5a",
                              f"-iterations={mca.ITERATIONS}", f"-call-latency={mca.CALL_LATENCY}", str(asm)],
                             capture_output=True, text=True, check=True).stdout
        total = int(re.search(r"^Total Cycles:\s+(\d+)", out, re.M).group(1))
        assert side.block_cycles[core.mcpu][0] == pytest.approx(total / mca.ITERATIONS)
        assert side.cycles[core.mcpu] == pytest.approx(sum(side.block_cycles[core.mcpu]))


def test_a_known_block_prices_as_llvm_mca_says():
    """Four independent adds and a dependent chain of four: the chain costs more on both cores."""
    from flagbench.model import mca
    independent = ["add x1, x1, #1", "add x2, x2, #1", "add x3, x3, #1", "add x4, x4, #1"]
    chain = ["add x1, x1, #1", "add x1, x1, #1", "add x1, x1, #1", "add x1, x1, #1"]
    for mcpu in ("cortex-a55", "cortex-a72"):
        p_ind, p_chain = mca.price("aarch64-linux-gnu", "+v8.5a", mcpu, [independent, chain])
        assert p_ind.priced == p_chain.priced == 4
        # a chain of 4 single-cycle adds repeated: 4 cycles an iteration, one add after another
        assert p_chain.cycles == pytest.approx(4.0, abs=0.1)
        assert p_ind.cycles < p_chain.cycles


def test_disassembly_round_trips_thumb_and_arm_blocks(module_cache):
    from flagbench.model import mca
    # Thumb-2: ldr r2,[r1]; add r0,r2; str r0,[r3]; subs r1,#1 (2 bytes each)
    text = mca.disassemble("thumbv7a-linux-gnueabihf", "+neon", bytes.fromhex("0a681044186001 39".replace(" ", "")))
    assert [ln.split()[0] for ln in text] == ["ldr", "add", "str", "subs"]
    # A32: add r0, r0, #1
    assert mca.disassemble("armv7a-linux-gnueabihf", "+neon", bytes.fromhex("010080e2")) == ["add r0, r0, #1"]


def test_cachesim_misses_follow_the_geometry_and_misaligned_loads_are_counted(tmp_path, module_cache):
    from flagbench.model.blocks import cache_per_iteration
    exe = _build(tmp_path, "scan", SCAN_C)
    small = "32768:4:32768:4:262144:8:64"        # 128 KB scanned through 32 KB: every line misses L1D
    large = "32768:4:262144:8:0:0:64"            # a 256 KB L1D, no L2: the array stays
    per = cache_per_iteration("aarch64", lambda k: [str(exe), str(k)], 20, [small, large], tmp_path, 120)
    assert per["c0.l1d_miss"] == 2048 + 2          # the scan's lines, odd_one's and odd's (evicted by it)
    assert per["c0.l2_miss"] == 0                 # 128 KB fits the 256 KB L2
    assert per["c1.l1d_miss"] == 0
    assert "c1.l2_miss" not in per
    assert per["misaligned"] == 1
    assert per["loads"] >= 2049


def test_cachesim_refuses_a_geometry_it_cannot_build(tmp_path, module_cache):
    from flagbench.errors import UserError
    from flagbench.model.blocks import cache_per_iteration
    exe = _build(tmp_path, "scan", SCAN_C)
    with pytest.raises(UserError, match="qemu"):
        cache_per_iteration("aarch64", lambda k: [str(exe), str(k)], 1, ["30000:3:32768:4:0:0:64"], tmp_path, 60)


MICRO = """
#include <stdint.h>
void assign(void *d, const void *s) { __builtin_memcpy(d, s, 8); }
static unsigned char a[64], b[64];
uint64_t assign_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		assign(a + (i & 15) + 1, b + (i & 31) + 3);
	return a[3];
}
"""


@pytest.mark.slow
def test_flagbench_model_prints_a_band_beside_exact_counts_and_says_no_model(tmp_path, module_cache):
    """The verb end to end: aarch64 with a band over two cores, loongarch64 with no model
    but its counts and cache figures; the exact counts equal the insncount plugin's."""
    exp = write_experiment(tmp_path / "exp", """
        sources = ["m.c"]
        targets = ["aarch64", "loongarch64"]
        compilers = ["clang"]
        cflags = ["-O2"]
        [variants]
        default = {}
        strict = { cflags = ["-mstrict-align"] }
        [[bench]]
        name = "assign"
        kind = "micro"
        function = "assign_loop"
        metrics = ["insns"]
        """, {"m.c": MICRO})
    out = flagbench("model", exp, "--format", "json", cache=module_cache, timeout=600)
    assert out.returncode == 0, out.stderr
    import json
    rows = json.loads(out.stdout)
    by_target = {r["target"]: r for r in rows if "target" in r}
    a64, la = by_target["aarch64"], by_target["loongarch64"]
    assert a64["cores"] == ["cortex-a55", "cortex-a72"] and all(a64["ratio"].values())
    assert la["no_model"].startswith("no model") and la["cores"] == []
    assert "c0.l1d_miss" in la["a"]["cache"]
    assert any("misaligned" in line for line in a64["not_modelled"])
    # the exact count per iteration, as flagbench run counts it
    run = flagbench("run", exp, "--db", tmp_path / "r.db", "--format", "json", cache=module_cache, timeout=600)
    assert run.returncode == 0, run.stderr
    text = flagbench("model", exp, cache=module_cache, timeout=600)
    assert "loongarch64: no model" in text.stdout and "cortex-a72" in text.stdout
    assert all(len(line) <= 100 for line in text.stdout.splitlines())
    counted = _insns_per_iter(run.stdout)
    assert counted[("aarch64", "default")] == a64["a"]["insns"]
    assert counted[("aarch64", "strict")] == a64["b"]["insns"]
    assert counted[("loongarch64", "strict")] == la["b"]["insns"]


def _insns_per_iter(stdout: str) -> dict:
    """(target, variant) -> insns_per_iter from `flagbench run --format json`'s exact-count tables."""
    import json
    found = {}
    for table in json.loads(stdout)["tables"]:
        for row in table["rows"]:
            if row["params"].get("count") == "insns_per_iter":
                for variant, cell in row["variants"].items():
                    found[(table["target"], variant)] = cell["median"]
    return found


def test_bad_core_is_one_line_and_exit_2(tmp_path, module_cache):
    exp = write_experiment(tmp_path / "exp", """
        sources = ["a.c"]
        targets = ["aarch64"]
        [variants]
        default = {}
        [[bench]]
        name = "x"
        kind = "micro"
        function = "a_fn"
        """)
    out = flagbench("model", exp, "--core", "cortex-z99", cache=module_cache, timeout=120)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "cortex-z99" in out.stderr


REP_C = r"""
#include <stdlib.h>
static unsigned long src[25], dst[25];
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10);
	for (unsigned long i = 0; i < n; i++) {
		void *d = dst, *s = src;
		unsigned long c = 25;
		__asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
	}
	return 0;
}
"""


def test_string_instructions_are_counted_and_kept_out_of_the_cycles(tmp_path, module_cache):
    """A rep movsq of 25 elements: qemu runs its block once per element and once more to see
    rcx at 0; those runs are named, and the cycles are only those of the other blocks."""
    from flagbench.model.band import Comparison, model_side
    from flagbench.model.cores import CORES
    exe = _build(tmp_path, "rep", REP_C, "gcc")
    cores = CORES["x86_64"]
    side = model_side("A", "x86_64", exe, lambda k: [str(exe), str(k)], 100, cores, tmp_path, 60, cache=False)
    assert side.string_ops == 26
    rep_blocks = [i for i, text in enumerate(side.asm) if any(ln.startswith("rep movsq") for ln in text)]
    assert rep_blocks
    for core in cores:
        only_rep = [i for i in rep_blocks if len(side.asm[i]) == 1]
        assert only_rep and all(side.block_cycles[core.mcpu][i] == 0 for i in only_rep)
        assert side.cycles[core.mcpu] > 0
    c = Comparison("rep", "x86_64", "gcc", side, side, cores)
    assert any("string instructions" in line and "NOT in the cycles" in line for line in c.unmodelled())


IT_C = r"""
#include <stdlib.h>
volatile unsigned long sink;
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10), s = 0;
	for (unsigned long i = 0; i < n; i++)
		if (i & 1)
			s += i;
	sink = s;
	return 0;
}
"""


def test_what_llvm_mca_cannot_price_is_counted_not_zero(tmp_path, module_cache):
    """cortex-r52 has no scheduling figure for Thumb-2's `it`: each one run is counted as
    unpriced; cortex-a57 prices it."""
    from flagbench.model.band import model_side
    from flagbench.model.cores import CORES
    exe = _build(tmp_path, "it", IT_C, "arm-linux-gnueabihf-gcc")
    r52, a57 = CORES["arm"]
    side = model_side("A", "arm", exe, lambda k: [str(exe), str(k)], 1000, (r52, a57), tmp_path, 60, cache=False)
    assert side.blocks[0].thumb
    its = sum(b.per_iter for b, text in zip(side.blocks, side.asm) for ln in text if re.match(r"it[te]*\s", ln))
    assert its > 0
    assert side.unpriced["cortex-r52"] == pytest.approx(its)
    assert side.unpriced["cortex-a57"] == 0


def test_measure_on_x86_64_puts_a_measured_ratio_beside_the_model(tmp_path, module_cache):
    """--measure: A and B timed here, reported apart from the model (no assertion on the time
    itself: only that it is there, ordered, and never folded into the cycles)."""
    import json
    exp = write_experiment(tmp_path / "exp", """
        sources = ["m.c"]
        targets = ["x86_64"]
        compilers = ["gcc"]
        cflags = ["-O2"]
        [variants]
        default = {}
        O0 = { cflags = ["-O0"] }
        [[bench]]
        name = "assign"
        kind = "micro"
        function = "assign_loop"
        metrics = ["insns"]
        """, {"m.c": MICRO})
    out = flagbench("model", exp, "--measure", "--no-cache", "--format", "json", cache=module_cache, timeout=600)
    assert out.returncode == 0, out.stderr
    row = next(r for r in json.loads(out.stdout) if "target" in r)
    m = row["measured"]
    assert m["a_ns"] > 0 and m["b_ns"] > 0 and m["low"] <= m["ratio"] <= m["high"]
    assert row["cores"] == ["skylake", "znver3"]
    # the modelled ratio is the cycles' own, whatever was measured
    for core, ratio in row["ratio"].items():
        assert ratio == pytest.approx(row["b"]["cycles"][core] / row["a"]["cycles"][core])
