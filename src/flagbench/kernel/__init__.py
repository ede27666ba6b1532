"""Kernel experiments: a real kernel tree built as variants A and B (Kbuild `O=` per cell),
compared (vmlinux size, asm, per object) and booted under qemu-system.

(The [kernel] table itself is parsed by flagbench/kernelspec.py, beside the other spec modules.)
source   the tree: Debian's linux-source unpacked once, a user's tree, patched copies
config   base config + fragments, olddefconfig, and the check that every option came out as asked
kbuild   build_kernels(): each cell in its own O= directory through ccache, with a progress bar
objects  which built objects' code changed between two O= trees, ranked
summary  the short text a developer pastes under the patch
boot, initramfs, guest   each kernel booted with flagbench's /init and the guest benches
"""
