"""Text from commits and compilers reaches the terminal escaped (flagbench.textsafe): a commit
subject or a compiler's error holding ESC and BEL (an `#error` line prints its bytes as they
are) is shown with its controls as \\x1b, \\x07, in `build` (C and kernel) and `bisect`.
A stand-in kernel tree (a git repository whose Makefile answers Kbuild's targets) keeps the
kernel path free of a Linux build.
"""
from __future__ import annotations

import shutil

import pytest

from conftest import flagbench, write_experiment
from kernel_util import STAND_IN_KBUILD
from test_bisect import LOOP_C, LOOP_EXPERIMENT, _git

NASTY = "\x1b[31mred\x07 <img src=x onerror=alert(1)><script>x</script>"
RAW = ("\x1b", "\x07")


def _clean(text: str) -> bool:
    return not any(c in text for c in RAW)


def test_a_c_compiler_error_is_escaped(tmp_path):
    exp = write_experiment(tmp_path / "exp", LOOP_EXPERIMENT.replace('metrics = ["time", "insns"]', ""),
                           {"loop.c": LOOP_C.format(note="x", turns=3) + f"#error {NASTY}\n"})
    done = flagbench("build", exp, cache=tmp_path / "cache")
    assert done.returncode == 2 and "error" in done.stderr
    assert _clean(done.stdout + done.stderr) and "\\x1b[31mred\\x07" in done.stderr, done.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (callgrind)")
def test_bisect_escapes_subjects_and_compiler_errors(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "experiment.toml").write_text(LOOP_EXPERIMENT)
    (root / "loop.c").write_text(LOOP_C.format(note="good", turns=10))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "good")
    _git(root, "tag", "good")
    for i, (turns, extra) in enumerate([(10, f"#error {NASTY}\n"), (11, ""), (11, "")]):
        (root / "loop.c").write_text(LOOP_C.format(note=str(i), turns=turns) + extra)
        _git(root, "commit", "-qam", f"step {i} {NASTY}")
    done = flagbench("bisect", root / "experiment.toml", "--good", "good", "--bad", "main", "--threshold", "+5%",
                     cache=tmp_path / "cache")
    assert done.returncode in (0, 1), done.stderr
    assert "does not build" in done.stderr and "first bad commit" in done.stdout
    assert _clean(done.stdout + done.stderr), done.stdout + done.stderr


MAKEFILE = STAND_IN_KBUILD + """\t@printf 'f.c:1:1: error: \\033[31mboom\\007\\n'; exit 1
"""


def test_a_kernel_compiler_error_and_a_commit_subject_are_escaped(tmp_path):
    src = tmp_path / "linux"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    (src / "Kconfig").write_text("")
    _git(src, "init", "-q", "-b", "main")
    _git(src, "add", ".")
    _git(src, "commit", "-qm", f"a subject {NASTY}")
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "experiment.toml").write_text(f'name = "k"\ntargets = ["x86_64"]\n[kernel]\nsource = "{src}"\n'
                                         'config = "tinyconfig"\n[variants]\nhead = { ref = "HEAD" }\n')
    done = flagbench("build", exp, cache=tmp_path / "cache", env={"COLUMNS": "200"})
    said = done.stdout + done.stderr
    assert "FAILED" in said and "boom" in said and "a subject" in said, said
    assert _clean(said), said


def test_a_c_build_note_is_printed_escaped(tmp_path):
    """A note (an optional flag the compiler rejects, named with an ESC in it) is printed, escaped:
    the path that printed notes once raised a NameError on every C build with a note."""
    exp = write_experiment(tmp_path / "exp", """
        sources = ["a.c"]
        [variants]
        odd = { optional_cflags = ["-fno-such-flag-\\u001b[31m"] }
        """)
    done = flagbench("build", exp, cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    note = next(ln for ln in done.stdout.splitlines() if ln.startswith("note: "))
    assert "rejects optional -fno-such-flag-\\x1b[31m" in note and _clean(done.stdout + done.stderr)
