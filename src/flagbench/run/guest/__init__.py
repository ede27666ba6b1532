"""The qemu guest: a place where benches run inside a booted kernel (kernel experiments).

boot        each kernel booted under qemu-system with flagbench's /init (boot-TARGET.config fragments)
initramfs   the newc cpio writer for that /init and the bench programs
guest       the guest benches: guest_init.c, wis_guest.c and guest_markers.h built and run as cells
box         the kexec test box: a small x86_64 machine under qemu reached by ssh (box-x86_64.config)
The C files and .config fragments ship as package data and are found beside these modules.
"""
