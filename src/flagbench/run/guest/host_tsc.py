"""This machine's TSC frequency, for a qemu TCG guest's command line (`tsc_early_khz=`).

Under TCG a guest's rdtsc reads this machine's TSC (qemu's cpu_get_host_ticks), so the guest's TSC
runs at this machine's rate; but a tinyconfig guest has no HPET or ACPI PM timer to calibrate it
against, only the PIT, whose emulated reads come late when this machine is busy. Booted under
load, the box's kernel said "Marking TSC unstable due to could not calculate TSC khz" in 2 of 3
boots and kept time with refined-jiffies (4 ms steps): a timed bench there read "ns 0". Given
the rate, it does not calibrate at all.

The rate is measured here: a small C program reads the TSC and CLOCK_MONOTONIC_RAW around a
100 ms sleep (a read delayed by the scheduler moves the result by microseconds in 100 ms:
parts in 10^5), three times, and prints the median in kHz. Built once into the cache; the rate
is kept there for this boot of this machine (its TSC rate does not change while it runs), so a
box's second start does not wait 0.3 s for it again.
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path

PROBE_C = r"""
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static unsigned long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

int main(void)
{
	unsigned long long khz[3], t;
	struct timespec nap = { 0, 100000000 };
	int i, j;

	for (i = 0; i < 3; i++) {
		unsigned long long t0 = now_ns(), c0 = __rdtsc();
		nanosleep(&nap, 0);
		unsigned long long c1 = __rdtsc(), t1 = now_ns();
		khz[i] = (c1 - c0) * 1000000ull / (t1 - t0);
	}
	for (i = 0; i < 3; i++)
		for (j = i + 1; j < 3; j++)
			if (khz[j] < khz[i])
				t = khz[i], khz[i] = khz[j], khz[j] = t;
	printf("%llu\n", khz[1]);
	return 0;
}
"""


def tsc_khz(cache: Path) -> int | None:
    """This machine's TSC rate in kHz; None off x86_64 or where it cannot be measured (the guest
    then calibrates as before)."""
    if platform.machine() != "x86_64":
        return None
    boot = boot_id()
    kept = cache / f"tsc-khz.{boot}" if boot else None
    if kept is not None:
        try:
            khz = _rate(kept.read_text())
            if khz:
                return khz
        except OSError:
            pass
    khz = _measure(cache)
    if khz and kept is not None:
        for old in cache.glob("tsc-khz.*"):    # earlier boots' (not another start's file being written)
            if old != kept and not old.name.endswith(".tmp"):
                old.unlink(missing_ok=True)
        tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(f"{khz}\n")
            tmp.replace(kept)
        except OSError:
            tmp.unlink(missing_ok=True)
    return khz


def boot_id() -> str | None:
    """This boot of this machine (the kernel's random boot id), or None where it is not known."""
    try:
        text = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return text if text and all(c in "0123456789abcdef-" for c in text) else None


def _rate(text: str) -> int | None:
    khz = int(text) if text.strip().isdigit() else 0
    return khz if 100_000 <= khz <= 20_000_000 else None    # 100 MHz .. 20 GHz, else not a TSC rate


def _measure(cache: Path) -> int | None:
    exe = cache / f"tsc-khz-{hashlib.sha256(PROBE_C.encode()).hexdigest()[:12]}"
    try:
        if not exe.exists():
            cache.mkdir(parents=True, exist_ok=True)
            tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")     # two box starts at once
            subprocess.run(["gcc", "-O2", "-x", "c", "-o", str(tmp), "-"], input=PROBE_C, text=True,
                           capture_output=True, check=True, timeout=120)
            tmp.replace(exe)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return _rate(out)
