"""The box's TSC rate (`run/guest/host_tsc.py`): measured here by a real probe against the rate
the running kernel found, and kept for this boot only."""
import platform
import re
import subprocess

import pytest

from flagbench.run.guest import host_tsc

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe reads x86's TSC")


def _kernels_khz() -> int | None:
    """The TSC rate the running kernel printed at boot (refined, else detected), in kHz; None
    where its log cannot be read."""
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for pattern in (r"Refined TSC clocksource calibration: (\d+)\.(\d{3}) MHz", r"Detected (\d+)\.(\d{3}) MHz TSC",
                    r"tsc: Detected (\d+)\.(\d{3}) MHz processor"):
        found = re.findall(pattern, log)
        if found:
            mhz, frac = found[-1]
            return int(mhz) * 1000 + int(frac)
    return None


def test_the_rate_is_the_kernels_and_is_kept_for_this_boot(tmp_path, monkeypatch):
    khz = host_tsc.tsc_khz(tmp_path)
    assert khz is not None
    known = _kernels_khz()
    if known:
        assert abs(khz - known) <= known // 1000, (khz, known)     # within 0.1 %
    # kept for this boot: asked again, the probe does not run (its program is gone and not rebuilt)
    for probe in tmp_path.glob("tsc-khz-*"):
        probe.unlink()
    assert host_tsc.tsc_khz(tmp_path) == khz and not list(tmp_path.glob("tsc-khz-*"))
    # another boot measures again, and keeps only its own
    monkeypatch.setattr(host_tsc, "boot_id", lambda: "another-boot")
    again = host_tsc.tsc_khz(tmp_path)
    assert abs(again - khz) <= khz // 1000 and list(tmp_path.glob("tsc-khz-*"))
    assert sorted(p.name for p in tmp_path.glob("tsc-khz.*")) == ["tsc-khz.another-boot"]


def test_a_damaged_kept_rate_is_measured_again(tmp_path):
    boot = host_tsc.boot_id()
    assert boot
    (tmp_path / f"tsc-khz.{boot}").write_text("12\n")      # not a TSC rate
    khz = host_tsc.tsc_khz(tmp_path)
    assert khz is not None and 100_000 <= khz and (tmp_path / f"tsc-khz.{boot}").read_text() == f"{khz}\n"
