"""The build stage's one face: what an experiment builds, C objects or a kernel tree (plain,
patched, or at a commit), as a Subject. `of(exp)` is the one place outside the build itself
that reads whether an experiment has a [kernel] table; every other stage asks its subject:

    kind                 "c" or "kernel", for what is only said (messages, option checks)
    build(cells, ...)    the cells built, in order (build.Build, or kbuild.build.KernelBuild)
    built(cell, ...)     one cell as a Built: what asm reads (`files`), what size compares
                         (`size_file`), what boots (`boots`) and its identity; or why it does not build
    kernels(...)         the kernel cells it builds (none for C); `guest_kernels` those guests boot
    pair(...)            (module function) the two cells size and asm compare, built, as a Pair
    at_commits(...)      one variant per commit, each the template at that commit
    aligned()            every variant again with each function 64-byte aligned (the layout check)
    with_host_config(..) `config = "host"` made the config a machine's kernel runs with

The C subject's host benches run on each commit's objects; the kernel subject's guest benches
boot each commit's kernel (under qemu-system: exact counts, not yet timed on a --host).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from flagbench.columns import ALIGN_FLAG, aligned_column
from flagbench.errors import DiskFull, UserError


@dataclass(frozen=True)
class Built:
    """One built cell, as the stages after the build read it."""
    build: object                 # build.Build (objects) or kbuild.build.KernelBuild
    files: tuple[Path, ...]       # the ELF files asm reads: the objects, or vmlinux
    size_file: Path               # what size compares: the objects' archive, or vmlinux
    cached: bool                  # nothing compiled now

    @property
    def boots(self) -> Path | None:
        """The kernel a guest boots (vmlinux; its image beside it), None for objects."""
        return getattr(self.build, "vmlinux", None)

    @property
    def identity(self) -> str:
        """What names this build: a kernel's KBUILD_BUILD_HOST, else the cell."""
        return getattr(self.build, "identity", "") or self.build.cell.key


class Subject:
    """C objects: the experiment's sources compiled per cell (build.py)."""
    kind = "c"
    times_commits = True          # a commit's timed benches run on a --host/--place (series, watch)

    def __init__(self, exp):
        self.exp = exp

    @property
    def sources_what(self) -> str:
        """What must be in a git repository for a series (said when it is not)."""
        return "the experiment's sources"

    def repository(self) -> Path | None:
        """The git repository whose commits its refs name: the one holding the C sources."""
        from flagbench import refspec
        return refspec.sources_repository(self.exp)

    # -- building ---------------------------------------------------------------------------
    def build(self, cells=None, *, jobs: int | None = None, progress: Callable[[str], None] | None = None,
              quiet: bool = False, notes: list[str] | None = None) -> list:
        """The cells (default: all) built; a cell that does not compile is a UserError."""
        from flagbench import build
        return build.build(self.exp, cells, jobs=jobs or 2, progress=progress, notes=notes)

    def build_pair(self, cells, *, jobs=None, progress=None, quiet: bool = False, notes=None) -> list:
        """The cells size and asm compare, built; bad input when there is nothing to compare."""
        exp = self.exp
        if not exp.sources and not all(c.variant.sources for c in cells):
            raise UserError(f"{exp.path}: no sources, so no objects to compare (size and asm compare the objects "
                            f"of two variants; name them with sources = [\"file.c\"])")
        return self.build(cells, jobs=jobs, progress=progress, notes=notes)

    def built(self, cell, *, jobs: int | None = None, progress: bool = False) -> Built | str:
        """One cell as a Built, or why it does not build (a line)."""
        from flagbench import build
        try:
            (b,) = build.build(self.exp, [cell], jobs=jobs or 2)
            return Built(b, tuple(b.objects), build.archive(b), b.cached)
        except DiskFull:
            raise
        except UserError as e:
            return str(e)

    def kernels(self, cells=None, *, jobs=None, progress: bool = True, boot: bool = False,
                keep_objects: bool = False) -> list:
        """The kernel cells built: none, for objects."""
        return []

    def guest_kernels(self, benches, *, progress: bool = True) -> list:
        """The kernels the guest BENCHES boot, built with the boot options every variant gets alike."""
        raise UserError(f"{self.exp.path}:{benches[0].line}: bench {benches[0].name}: guest = true needs a "
                        f"[kernel] table (the kernel it boots)")

    def commit_benches(self, benches) -> tuple[list, list]:
        """(host benches, guest benches) that run on each commit's build: the host ones."""
        return [b for b in benches if not b.guest], []

    # -- variants of the experiment ----------------------------------------------------------
    def at_commits(self, template, commits) -> tuple:
        """The experiment with one variant per commit (named by its short sha), each TEMPLATE at
        that commit: (experiment, {short sha: why it cannot be built}) (a source the commit lacks)."""
        from flagbench import refspec
        exp, variants, missing = self.exp, [], {}
        worktree_sources = template.sources if template.sources and template.commit is None else exp.sources
        for c in commits:
            try:
                sources = refspec.sources_at(c, worktree_sources, _raise)
            except UserError as e:
                missing[c.short] = str(e)
                sources = worktree_sources
            variants.append(replace(template, name=c.short, ref=c.sha, commit=c, sources=sources))
        return replace(exp, variants=tuple(variants)), missing

    @property
    def align_words(self) -> str:
        return ALIGN_FLAG

    def aligned(self):
        """The layout check's experiment: every variant again as `V@align64`, each function aligned."""
        return aligned_experiment(self.exp)

    def with_host_config(self, dest: str | None, host=None):
        """The experiment; only a kernel takes a machine's config."""
        return self.exp

    def boots(self) -> bool:
        """Whether its places boot its builds (hosts/factory.py): a kernel's guest benches."""
        return False

    def scratch_parent(self) -> Path | None:
        """Where a scratch directory that links to this subject's build files goes (None: the
        system's temporary directory)."""
        return None


class KernelSubject(Subject):
    """A kernel tree: the [kernel] table's source, configured and built per cell (kbuild/)."""
    kind = "kernel"
    times_commits = False         # under a fleet a kernel series is counted, not timed (yet)

    @property
    def sources_what(self) -> str:
        return f"the kernel source {self.exp.kernel.source}"

    def repository(self) -> Path | None:
        """The [kernel] source's repository (None for a Debian tree)."""
        from flagbench import refspec
        return refspec.tree_repository(self.exp.kernel.source)

    def build(self, cells=None, *, jobs=None, progress=None, quiet: bool = False, notes=None) -> list:
        return self.kernels(cells, jobs=jobs, progress=not quiet)

    def build_pair(self, cells, *, jobs=None, progress=None, quiet: bool = False, notes=None) -> list:
        """A cell that does not build is bad input, with its compiler's first error lines."""
        builds = self.kernels(cells, jobs=jobs, progress=not quiet)
        for b in builds:
            if not b.ok:
                first = (b.error or "").splitlines()[:3]
                raise UserError(f"{b.cell.key} did not build: {' / '.join(first)} "
                                f"(log: {b.dir / 'flagbench-make.log'})")
        return builds

    def built(self, cell, *, jobs: int | None = None, progress: bool = False) -> Built | str:
        try:
            (b,) = self.kernels([cell], jobs=jobs, progress=progress,
                                boot=any(b.guest for b in self.exp.benches))
        except DiskFull:
            raise
        except UserError as e:
            return str(e)
        if not b.ok:
            return (b.error or "make failed").splitlines()[0]
        return Built(b, (b.vmlinux,), b.vmlinux, b.cached)

    def kernels(self, cells=None, *, jobs=None, progress: bool = True, boot: bool = False,
                keep_objects: bool = False) -> list:
        """BOOT: with the options a guest needs to boot (kernel/boot-TARGET.config); KEEP_OBJECTS:
        a commit's build keeps its checkout and objects (object bisection relinks them)."""
        from flagbench.kbuild.build import build_kernels
        from flagbench.kbuild.config import boot_fragments
        fragments = boot_fragments(self.exp) if boot else ()
        return build_kernels(self.exp, cells, jobs=jobs, progress=progress, extra_fragments=fragments,
                             keep_objects=keep_objects)

    def guest_kernels(self, benches, *, progress: bool = True) -> list:
        return self.kernels(progress=progress, boot=True)

    def commit_benches(self, benches) -> tuple[list, list]:
        """A kernel's host benches run on its C cells, which no commit changes: the guest ones."""
        return [], [b for b in benches if b.guest]

    def at_commits(self, template, commits) -> tuple:
        exp = self.exp
        own = dict(exp.kernel.variants).get(template.name)
        variants = tuple(replace(template, name=c.short, ref=c.sha, commit=c, sources=None) for c in commits)
        out = replace(exp, variants=variants)
        if own is not None:
            out = replace(out, kernel=replace(exp.kernel, variants=tuple((c.short, own) for c in commits)))
        return out, {}

    @property
    def align_words(self) -> str:
        return "functions 64-byte aligned"

    def aligned(self):
        """Each variant's kernel with CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B where the tree has it
        (Linux 5.17 on; Debian's 6.1 and 6.12 do), else with -falign-functions=64 in its kcflags.

        >>> from flagbench import spec
        >>> k = of(spec.load(Path(__file__).parents[2] / "tests" / "data" / "kernel")).aligned().kernel
        >>> [name for name, _ in k.variants][:2], {o.line for _, c in k.variants for o in c.options[-1:]}
        (['default@align64', 'patched@align64'], {'CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y'})
        """
        from flagbench.kernelspec import Changes, Option
        exp = self.exp
        extra = Changes(options=(Option(KERNEL_ALIGN_OPTION, "y", "flagbench run --layout-check"),)) \
            if _tree_has_option(exp.kernel.source, KERNEL_ALIGN_OPTION) else Changes(kcflags=(ALIGN_FLAG,))
        own = dict(exp.kernel.variants)
        out = aligned_experiment(exp)
        return replace(out, kernel=replace(exp.kernel, variants=tuple(
            (aligned_column(v.name), own.get(v.name, Changes()).plus(extra)) for v in exp.variants)))

    def boots(self) -> bool:
        return any(b.guest for b in self.exp.benches)

    def scratch_parent(self) -> Path | None:
        """Beside the build directories (object bisection's mixes hard-link their objects)."""
        from flagbench.cache import cache_dir
        parent = cache_dir() / "kernel" / "mixes"
        parent.mkdir(parents=True, exist_ok=True)
        return parent

    def with_host_config(self, dest: str | None, host=None):
        """`config = "host"` (DEST's, the --host) or `"host:SOURCE"` made the config that machine's
        kernel runs with (hosts/kexec.py fetches it); HOST: DEST already opened by this run."""
        from flagbench.kernelspec import is_host_config
        exp = self.exp
        if not is_host_config(exp.kernel.config):
            return exp
        from flagbench.hosts import kexec
        path = kexec.host_config_file(exp.path, exp.kernel.config, dest, host)
        return replace(exp, kernel=replace(exp.kernel, config=str(path), hash=_sha(exp.kernel.hash + path.name)))


class Pair(NamedTuple):
    """Two builds of one experiment, made by the build stage, for size and asm to compare.
    Each side is a build.Build (a C experiment's objects) or a kbuild.build.KernelBuild
    (one vmlinux); `files(side)` is what an ELF reader reads either way."""
    old: object               # build.Build or kbuild.build.KernelBuild
    new: object
    notes: list[str]          # what was chosen (when there was a choice) and what the build dropped
    kernel: bool              # the sides are kernels: a vmlinux each, and their build trees

    @staticmethod
    def files(side) -> list[Path]:
        """The ELF files of one side: its objects, or its vmlinux."""
        vmlinux = getattr(side, "vmlinux", None)
        return [vmlinux] if vmlinux is not None else list(side.objects)


def pair(path, variants: str | Sequence[str] | None = None, target: str | None = None,
         compiler: str | None = None, *, jobs: int | None = None, progress: Callable[[str], None] | None = None,
         quiet: bool = False) -> Pair:
    """Load the experiment (a path, or a spec.Experiment), build its two chosen cells (variants.choose)
    (cached: an unchanged experiment runs no compiler and no make) and return them.
    C builds report to `progress`; kernel builds show a bar unless `quiet`. A kernel cell
    that fails to build is a UserError with its compiler's error lines."""
    from flagbench import spec
    from flagbench.variants import choose
    exp = path if isinstance(path, spec.Experiment) else spec.load(path)
    old_cell, new_cell, notes = choose(exp, variants, target, compiler)
    cells = [old_cell] if old_cell == new_cell else [old_cell, new_cell]
    subject = of(exp)
    builds = subject.build_pair(cells, jobs=jobs, progress=progress, quiet=quiet, notes=notes)
    return Pair(builds[0], builds[-1], notes, subject.kind == "kernel")


# -- the layout check's builds: every function at a 64-byte boundary (run/layout.py measures them) --
# 0Day's manual step for "strange" bumps of commits that did not touch the benchmark's code: if
# the effect is gone once no function's placement depends on its neighbours' sizes, it was layout.

KERNEL_ALIGN_OPTION = "CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B"   # lib/Kconfig.debug, where the tree has it


def aligned_experiment(exp):
    """The experiment again, every variant `V` as `V@align64` with ALIGN_FLAG last on its command
    line (after every other flag, so nothing undoes it); benches relink no layouts (`layouts`: the
    check is one more layout, every function at a 64-byte boundary). A kernel's variants are
    aligned by KernelSubject.aligned (KERNEL_ALIGN_OPTION, or ALIGN_FLAG in its kcflags).
    """
    from flagbench.benchspec import MicroBench
    variants = tuple(replace(v, name=aligned_column(v.name), cflags=(*v.cflags, ALIGN_FLAG)) for v in exp.variants)
    benches = tuple(replace(b, layouts=0, layout_variants=None) if isinstance(b, MicroBench) else b
                    for b in exp.benches)
    return replace(exp, variants=variants, benches=benches)


def of(exp) -> Subject:
    """The subject an experiment builds: its [kernel] table's tree, else its C sources."""
    return KernelSubject(exp) if exp.kernel is not None else Subject(exp)


def _raise(what: str):
    raise UserError(what)


def _sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()


def _tree_has_option(source: str, option: str) -> bool:
    """Whether a kernel source offers OPTION (KERNEL_ALIGN_OPTION: lib/Kconfig.debug, Linux 5.17 on)."""
    if source.startswith("debian:"):   # the trees flagbench unpacks: 6.1, 6.12
        return True
    kconfig = Path(source) / "lib" / "Kconfig.debug"
    try:
        return f"config {option[len('CONFIG_'):]}\n" in kconfig.read_text(errors="replace")
    except OSError:
        return False
