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

/* The table's layout, for _summary.c and _rows.c (the blocks it prints). */
struct entry {
	uint64_t hash, size, foot;
	Py_ssize_t off, len;
	uint8_t letter;
};

typedef struct {
	PyObject_HEAD
	uint8_t wanted[256], code[256];
	PyObject *prefixes, *names;	/* tuples of bytes */
	uint8_t prefix_first[256];	/* the prefixes' first bytes (all, for an empty one): others need no compare */
	uint64_t name_lens;		/* bit min(len, 63) set for each skipped name's length: others need no compare */
	char *arena;
	Py_ssize_t arena_len, arena_cap;
	struct entry *entries;
	Py_ssize_t n, cap;
	Py_ssize_t *slots;		/* open addressing: entry index + 1, 0 empty */
	Py_ssize_t nslots;
	uint8_t *map;			/* the three arrays' first home, on huge pages (map_arrays) */
	size_t maplen;
	unsigned long long skipped;
	/* bytes of the names holding ".cold" (the text format's `.cold symbols` row), summed as they
	 * are added, on the reading threads: a pass over both tables after them was a twentieth of
	 * that format's instructions. COLD_COUNTED: 0 in a Summary.loads copy, which size_of scans. */
	unsigned long long cold;
	int cold_counted;
} Summary;

/* The entry named NAME (LEN bytes, hash HASH) in S, or NULL. */
struct entry *summary_find(Summary *s, const char *name, Py_ssize_t len, uint64_t hash);

/* _rows.c: Summary.bom_text and Summary.text_block, and their docs. */
PyObject *summary_bom_text(Summary *old, PyObject *args);
PyObject *summary_text_block(Summary *old, PyObject *args);
extern const char bom_text_doc[], text_block_doc[];

#endif
