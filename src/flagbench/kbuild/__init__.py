"""Kernel builds: a real kernel tree built as variants A and B (Kbuild `O=` per cell).

(The [kernel] table itself is parsed by flagbench/kernelspec.py, beside the other spec modules.
What is made of the builds lives in the later stages: size/objects.py and size/summary.py compare
them, run/guest/ boots them under qemu, hosts/kexec.py boots them on a real host.)
source   the tree: Debian's linux-source unpacked once, a user's tree, patched copies
config   base config + fragments, olddefconfig, and the check that every option came out as asked
kconfig  the Kconfig reader that explains an option that did not come out as asked
build    build_kernels(): each cell in its own O= directory through ccache, with a progress bar
"""
