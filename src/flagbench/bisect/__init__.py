"""Bisection: to the first commit of a range where a metric moves (commits.py, on exact counts
or on paired time, timed.py), and to the object files of a variant that carry its change
(objects.py: C experiments by linking mixes, cobjects.py; kernels by Kbuild relinks of A's O=
directory with some of B's objects, kobjects.py). The searches themselves are search.py."""
