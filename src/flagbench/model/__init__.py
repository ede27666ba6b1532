"""Time without the machine: a modelled cycle band for builds A and B.

blocks.py runs a program under qemu-user with the bbcount and cachesim plugins, mca.py prices
each executed block with llvm-mca-19 on a core model (cores.py), band.py sums and compares,
experiment.py walks an experiment's benches, render.py prints. See docs/model.md.
"""
