/*
 * _summary.h: what _symtab.c needs of _summary.c (bloat-o-meter's table in C).
 */
#ifndef FLAGBENCH_SUMMARY_H
#define FLAGBENCH_SUMMARY_H

#include <Python.h>
#include <stdint.h>

extern PyTypeObject SummaryType;

/* Add one sized symbol (its raw name) to SUMMARY, a SummaryType; -1 with an exception set. */
int summary_add(PyObject *summary, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap,
		uint8_t letter);

/* The same without the GIL: no exception set, -1 when out of memory. */
int summary_add_raw(PyObject *summary, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap,
		    uint8_t letter);

struct elf;
struct listing;

/* Add the sized symbols of listing L (of E) to SUMMARY, without the GIL: -1 when out of memory. */
int summary_add_listing(PyObject *summary, const struct elf *e, const struct listing *l);

/* Room for N more symbols of NAMES bytes of names in all, without the GIL: -1 when out of memory. */
int summary_reserve(PyObject *summary, Py_ssize_t n, Py_ssize_t names);

#endif
