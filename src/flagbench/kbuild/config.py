"""A cell's .config: the base (tinyconfig, defconfig, allnoconfig, *_defconfig or a .config
file), the fragments merged in the way scripts/kconfig/merge_config.sh does (a later line for
an option replaces the earlier one), then `make olddefconfig`; and then the truth: every
option asked for is compared with the final .config. merge_config.sh only warns when Kconfig
drops or changes one; here that is a UserError naming the option, what was asked, what came
out and, where the Kconfig files say, the unmet dependency — before anything compiles.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError
from flagbench.kbuild import kconfig
from flagbench.kernelspec import Option, parse_lines, read_config


def merge(config: Path, options: list[Option]) -> None:
    """merge_config.sh's merge: each option's old line goes, the asked line is appended."""
    names = {o.name for o in options}
    kept = []
    for line in config.read_text(errors="replace").splitlines():
        parsed = parse_lines([line], lambda i: str(config)) if line.strip() else ()
        if parsed and parsed[0].name in names:
            continue
        kept.append(line)
    last = {o.name: o for o in options}           # the last line for an option wins
    kept += [o.line for o in last.values()]
    config.write_text("\n".join(kept) + "\n")


def configure(make: list[str], odir: Path, base: str, options: list[Option], env: dict,
              timeout: int = 900) -> None:
    """Write ODIR/.config: BASE, OPTIONS merged in, olddefconfig. MAKE is the make argv up to
    (not including) the target. A failing make is a UserError with its last lines."""
    odir.mkdir(parents=True, exist_ok=True)
    if base.startswith("/"):
        shutil.copyfile(base, odir / ".config")
    else:
        _make(make + [base], env, timeout, f"make {base}")
    if options:
        merge(odir / ".config", options)
    _make(make + ["olddefconfig"], env, timeout, "make olddefconfig")


def _make(argv: list[str], env: dict, timeout: int, what: str) -> None:
    done = procs.run(argv, env=env, timeout=timeout)
    if done.failure:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        raise UserError(f"{what} failed ({done.failure}): {' / '.join(lines[-4:])}")


def mismatches(options: list[Option], final: dict[str, str]) -> list[tuple[Option, str]]:
    """(the option as last asked, what .config has) for each one that did not come out so."""
    last = {o.name: o for o in options}
    out = []
    for o in last.values():
        got = final.get(o.name, "n")
        if got != o.value:
            out.append((o, got))
    return out


def check_truth(options: list[Option], config_path: Path, src: Path, srcarch: str, cell: str) -> None:
    """UserError unless every asked option is in the final .config as asked."""
    final = read_config(config_path)
    bad = mismatches(options, final)
    if not bad:
        return
    parts = []
    for o, got in bad:
        shown = "not set" if got == "n" else got
        reason = kconfig.why(src, srcarch, o.name, o.value, final)
        parts.append(f"{o.name}: asked {o.value} ({o.origin}), got {shown}: {reason}")
    raise UserError(f"{cell}: Kconfig did not keep {len(bad)} option{'s' * (len(bad) > 1)}: " + "; ".join(parts))


# The options a kernel needs to boot under flagbench's guest (serial console, initramfs, ...) are
# the guest's files; every variant gets them alike, so the build adds them.
GUEST_FILES = Path(__file__).resolve().parents[1] / "run" / "guest"


def boot_fragment(target_name: str) -> Path | None:
    """The config fragment a target's kernel needs to boot here (kernel/boot-TARGET.config),
    for kbuild.build_kernels(extra_fragments=...): the same for every variant."""
    path = GUEST_FILES / f"boot-{target_name}.config"
    return path if path.is_file() else None


def boot_fragments(exp) -> list[Path]:
    """The boot fragments a kernel experiment's guest benches need and it does not already ask
    for (a case may list the fragment itself, so build/size/asm and run share one build):
    pass them as build_kernels(extra_fragments=...)."""
    asked = {(o.name, o.value) for o in exp.kernel.common.options}
    out = []
    for name in sorted({c.target for c in exp.cells()}):
        path = boot_fragment(name)
        if path is None:
            continue
        wanted = {tuple(line.strip().split("=", 1)) for line in path.read_text().splitlines()
                  if line.startswith("CONFIG_") and "=" in line}
        if not wanted <= asked:
            out.append(path)
    return out
