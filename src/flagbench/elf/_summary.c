/*
 * Summary: one bloat-o-meter table being filled, symbol by symbol, in C (part of the
 * flagbench.elf._symtab extension; _symtab.c feeds it). A symbol of one of the table's letters
 * is skipped by bloat-o-meter's rules (a ':' anywhere, a skipped prefix, a skipped exact name:
 * passed in from flagbench.size.rules) or renamed (every '.' followed by digits removed, as
 * `re.sub(r"\.[0-9]+", "", name)`), then summed under that name in a hash table. Two tables
 * compare themselves (diff), so Python objects are made only for the rows that differ; the
 * blocks they print (bom_text, text_block) are _rows.c's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>

#include "_elf.h"
#include "_summary.h"

static int summary_init(Summary *self, PyObject *args, PyObject *kw)
{
	Py_buffer letters, code;
	PyObject *prefixes, *names;
	Py_ssize_t i;

	if (!PyArg_ParseTuple(args, "y*y*O!O!", &letters, &code, &PyTuple_Type, &prefixes, &PyTuple_Type, &names))
		return -1;
	memset(self->wanted, 0, sizeof(self->wanted));
	memset(self->code, 0, sizeof(self->code));
	for (i = 0; i < letters.len; i++)
		self->wanted[((uint8_t *)letters.buf)[i]] = 1;
	for (i = 0; i < code.len; i++)
		self->code[((uint8_t *)code.buf)[i]] = 1;
	PyBuffer_Release(&letters);
	PyBuffer_Release(&code);
	for (i = 0; i < PyTuple_GET_SIZE(prefixes); i++)
		if (!PyBytes_Check(PyTuple_GET_ITEM(prefixes, i)))
			goto bad;
	for (i = 0; i < PyTuple_GET_SIZE(names); i++)
		if (!PyBytes_Check(PyTuple_GET_ITEM(names, i)))
			goto bad;
	memset(self->prefix_first, 0, sizeof(self->prefix_first));
	self->name_lens = 0;
	for (i = 0; i < PyTuple_GET_SIZE(names); i++)
		self->name_lens |= 1ULL << Py_MIN(PyBytes_GET_SIZE(PyTuple_GET_ITEM(names, i)), 63);
	for (i = 0; i < PyTuple_GET_SIZE(prefixes); i++) {
		PyObject *p = PyTuple_GET_ITEM(prefixes, i);

		if (PyBytes_GET_SIZE(p))
			self->prefix_first[(uint8_t)PyBytes_AS_STRING(p)[0]] = 1;
		else
			memset(self->prefix_first, 1, sizeof(self->prefix_first));
	}
	Py_XSETREF(self->prefixes, Py_NewRef(prefixes));
	Py_XSETREF(self->names, Py_NewRef(names));
	self->cold_counted = self->n == 0;
	return 0;
bad:
	PyErr_SetString(PyExc_TypeError, "Summary: skip rules must be bytes");
	return -1;
}

/* P is in S's mapping (map_arrays), not PyMem's. */
static int mapped_here(const Summary *s, const void *p)
{
	return s->map && (const uint8_t *)p >= s->map && (const uint8_t *)p < s->map + s->maplen;
}

static void array_free(Summary *s, void *p)
{
	if (!mapped_here(s, p))
		PyMem_RawFree(p);
}

/* PyMem_RawRealloc for one of S's arrays (OLD bytes): one in the mapping moves out of it to PyMem. */
static void *array_realloc(Summary *s, void *p, size_t old, size_t n)
{
	void *q;

	if (!mapped_here(s, p))
		return PyMem_RawRealloc(p, n);
	if ((q = PyMem_RawMalloc(n)))
		memcpy(q, p, Py_MIN(old, n));
	return q;
}

static void summary_dealloc(Summary *self)
{
	Py_XDECREF(self->prefixes);
	Py_XDECREF(self->names);
	array_free(self, self->arena);
	array_free(self, self->entries);
	array_free(self, self->slots);
	if (self->map)
		munmap(self->map, self->maplen);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int skipped_name(Summary *s, const char *name, Py_ssize_t len)
{
	Py_ssize_t i, nprefixes = PyTuple_GET_SIZE(s->prefixes), nnames = PyTuple_GET_SIZE(s->names);

	if (memchr(name, ':', len))
		return 1;
	for (i = 0; s->prefix_first[len ? (uint8_t)name[0] : 0] && i < nprefixes; i++) {
		PyObject *p = PyTuple_GET_ITEM(s->prefixes, i);
		const char *q = PyBytes_AS_STRING(p);
		Py_ssize_t k = PyBytes_GET_SIZE(p);

		/* the first bytes here, not in memcmp: the kernel's prefixes all start "__", and a
		 * call per prefix per symbol was a twentieth of the default format's instructions */
		if (len >= k && (k < 3 || (name[2] == q[2] && name[1] == q[1] && name[0] == q[0])) &&
		    memcmp(name, q, k) == 0)
			return 1;
	}
	for (i = 0; (s->name_lens >> Py_MIN(len, 63) & 1) && i < nnames; i++) {
		PyObject *p = PyTuple_GET_ITEM(s->names, i);

		if (len == PyBytes_GET_SIZE(p) && memcmp(name, PyBytes_AS_STRING(p), len) == 0)
			return 1;
	}
	return 0;
}

/* Rehash into a slot table of at least twice ENTRIES, and of the entries (a power of two, 1024 or more). */
static int summary_grow(Summary *s, Py_ssize_t entries)
{
	Py_ssize_t nslots = 1024, i;
	Py_ssize_t *slots;

	while (nslots < 2 * (entries + 1))
		nslots *= 2;
	if (nslots <= s->nslots)
		nslots = 2 * s->nslots;
	slots = prefaulted(PyMem_RawCalloc(nslots, sizeof(*slots)), nslots * sizeof(*slots));

	if (!slots)
		return -1;
	for (i = 0; i < s->n; i++) {
		Py_ssize_t j = s->entries[i].hash & (nslots - 1);

		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = i + 1;
	}
	array_free(s, s->slots);
	s->slots = slots;
	s->nslots = nslots;
	return 0;
}

/* A name's hash, eight bytes at a time (LLVM's names are long: bytewise hashing was a tenth of
 * `flagbench size --format=bom` on its archives). Only ever compared within this program. */
static uint64_t hash_of(const char *s, Py_ssize_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n, w;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 29);
}

int summary_add(PyObject *summary, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap, uint8_t letter)
{
	if (summary_add_raw(summary, raw, rawlen, size, gap, letter) < 0)
		return PyErr_NoMemory(), -1;
	return 0;
}

/*
 * Room in S for N more entries and NAMES more bytes of names, each at least doubling when it
 * grows (an archive's members reserve one after another). 0, or -1 when out of memory.
 */
static inline int make_room(Summary *s, Py_ssize_t n, Py_ssize_t names)
{
	Py_ssize_t cap;

	if (s->arena_len + names > s->arena_cap) {
		char *arena;

		cap = Py_MAX(s->arena_len + names, 2 * s->arena_cap) + 4096;
		if (!(arena = array_realloc(s, s->arena, s->arena_cap, cap)))
			return -1;
		s->arena = arena;
		s->arena_cap = cap;
	}
	if (s->n + n > s->cap) {
		struct entry *entries;

		cap = Py_MAX(Py_MAX(s->n + n, 2 * s->cap), 1024);
		if (!(entries = array_realloc(s, s->entries, s->cap * sizeof(*entries), cap * sizeof(*entries))))
			return -1;
		s->entries = entries;
		s->cap = cap;
	}
	return 0;
}

/*
 * The first reservation of an empty S, when it is of many names (a vmlinux's, not an archive's
 * first member's): its three arrays laid out in one mapping on huge pages, made present at once.
 * Populating a tinyconfig vmlinux's (1.2 MB a side) in 4 KB pages took 0.7-1.4 ms a thread
 * (strace -T), and the two reading threads' page tables waited on each other: one 2 MB page is
 * zeroed in 0.3-0.45 ms. Where the mapping fails, or for fewer names, PyMem's as before; an array
 * that outgrows its place moves to PyMem (array_realloc).
 */
static void map_arrays(Summary *s, Py_ssize_t n, Py_ssize_t names)
{
	Py_ssize_t nslots = 1024, cap = Py_MAX(n, 1024), arena_cap = names + 4096;
	size_t slots, entries, total;
	uint8_t *base;

	if (s->map || s->arena || s->entries || s->slots)
		return;
	while (nslots < 2 * (n + 1))
		nslots *= 2;
	slots = ((size_t)nslots * sizeof(*s->slots) + 63) & ~(size_t)63;
	entries = ((size_t)cap * sizeof(*s->entries) + 63) & ~(size_t)63;
	total = slots + entries + (size_t)arena_cap;
	if (total < ((size_t)512 << 10) || !(base = huge_pages(total, &s->map, &s->maplen)))
		return;
	s->slots = (Py_ssize_t *)base;		/* zeroed, as a fresh mapping is */
	s->nslots = nslots;
	s->entries = (struct entry *)(base + slots);
	s->cap = cap;
	s->arena = (char *)(base + slots + entries);
	s->arena_cap = arena_cap;
	prefaulted(base, total);
}

/*
 * Room in SUMMARY for N more names of NAMES bytes in all, made at once (the table doubling
 * from 1024 rehashed and copied a vmlinux's 30,000 names five times). Needs no GIL: 0, or -1
 * when out of memory.
 */
int summary_reserve(PyObject *summary, Py_ssize_t n, Py_ssize_t names)
{
	Summary *s = (Summary *)summary;

	map_arrays(s, n, names);
	if (make_room(s, n, names) < 0)
		return -1;
	/* what the member is about to write, not the doubled capacity: an archive's members reserve in turn */
	if (!mapped_here(s, s->arena))
		prefaulted(s->arena + s->arena_len, names);
	if (!mapped_here(s, s->entries))
		prefaulted(s->entries + s->n, n * sizeof(*s->entries));
	return 2 * (s->n + n + 1) > s->nslots ? summary_grow(s, s->n + n) : 0;
}

/* Whether NAME holds ".cold": its dots tried in turn (memmem's set-up per name cost more, where
 * a kernel's names hold a dot or two each: .constprop, .isra, __func__.12). Not inline: inside
 * add_one it cost every name six instructions, dotted or not. */
__attribute__((noinline)) static int has_cold(const char *name, Py_ssize_t len)
{
	const char *end = name + len, *p = memchr(name, '.', len);

	for (; p && end - p >= 5; p = memchr(p + 1, '.', end - p - 1))
		if (memcmp(p, ".cold", 5) == 0)
			return 1;
	return 0;
}

/* summary_add_raw's work, inline in summary_add_listing's loop (a call per symbol, its set-up and
 * return, were a tenth of what adding a name costs). */
static inline int add_one(Summary *s, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap,
			  uint8_t letter)
{
	const char *name = raw;
	Py_ssize_t len = rawlen, i, j;
	uint64_t hash;
	struct entry *e;
	int cold = 0;

	if (!s->wanted[letter])
		return 0;
	if (skipped_name(s, raw, rawlen)) {
		if (s->code[letter])
			s->skipped += size;
		return 0;
	}
	if (make_room(s, 1, rawlen) < 0)	/* the renamed name is written at the arena's end */
		return -1;
	if (memchr(raw, '.', rawlen)) {
		char *out = s->arena + s->arena_len;

		for (i = 0, len = 0; i < rawlen; i++) {
			if (raw[i] == '.' && i + 1 < rawlen && raw[i + 1] >= '0' && raw[i + 1] <= '9') {
				for (i++; i + 1 < rawlen && raw[i + 1] >= '0' && raw[i + 1] <= '9'; i++)
					;
				continue;
			}
			out[len++] = raw[i];
		}
		name = out;
		cold = has_cold(name, len);
	}
	if (cold)
		s->cold += size;
	hash = hash_of(name, len);
	if (2 * (s->n + 1) > s->nslots && summary_grow(s, s->n) < 0)
		return -1;
	for (j = hash & (s->nslots - 1); s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
		e = &s->entries[s->slots[j] - 1];
		if (e->hash == hash && e->len == len && memcmp(s->arena + e->off, name, len) == 0) {
			e->size += size;
			e->foot += size + gap;
			return 0;
		}
	}
	if (name == raw)
		memcpy(s->arena + s->arena_len, raw, len);
	e = &s->entries[s->n];
	e->hash = hash;
	e->off = s->arena_len;
	e->len = len;
	e->size = size;
	e->foot = size + gap;
	e->letter = letter;
	s->arena_len += len;
	s->slots[j] = ++s->n;
	return 0;
}

/* summary_add without the GIL (raw allocations, no exception): -1 when out of memory. */
int summary_add_raw(PyObject *summary, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap,
		    uint8_t letter)
{
	return add_one((Summary *)summary, raw, rawlen, size, gap, letter);
}

int summary_add_listing(PyObject *summary, const struct elf *e, const struct listing *l)
{
	Summary *s = (Summary *)summary;
	Py_ssize_t k, len;

	for (k = 0; k < l->n; k++) {
		const char *name;

		/* the letter and size first: a vmlinux lists many unsized labels, whose names need no length */
		if (!l->size[k] || !s->wanted[l->letter[k]])
			continue;
		name = string_at(e->str, e->strsize, l->name[k], &len);
		if (add_one(s, name, len, l->size[k], l->gap[k], l->letter[k]) < 0)
			return -1;
	}
	return 0;
}

PyDoc_STRVAR(summary_doc,
"Summary(letters, code_letters, skip_prefixes, skip_names)\n\n"
"One bloat-o-meter table filled by symbols(..., summaries): the symbols of LETTERS, skipped\n"
"or renamed by bloat-o-meter's rules, summed by name. result() -> (names, sizes, letters,\n"
"footprints, skipped): each name once in first-seen order, its summed size, first nm letter,\n"
"summed footprint (size plus the padding after it), and the bytes of symbols of\n"
"CODE_LETTERS the rules skipped.");

static PyObject *summary_result(Summary *s, PyObject *unused)
{
	PyObject *names = PyList_New(s->n), *sizes = PyList_New(s->n), *feet = PyList_New(s->n);
	PyObject *letters = PyUnicode_New(s->n, 255), *out = NULL;
	Py_ssize_t i;

	if (!names || !sizes || !feet || !letters)
		goto done;
	for (i = 0; i < s->n; i++) {
		struct entry *e = &s->entries[i];
		PyObject *name = PyUnicode_DecodeUTF8(s->arena + e->off, e->len, "surrogateescape");
		PyObject *size = PyLong_FromUnsignedLongLong(e->size);
		PyObject *foot = PyLong_FromUnsignedLongLong(e->foot);

		if (!name || !size || !foot) {
			Py_XDECREF(name);
			Py_XDECREF(size);
			Py_XDECREF(foot);
			goto done;
		}
		PyList_SET_ITEM(names, i, name);
		PyList_SET_ITEM(sizes, i, size);
		PyList_SET_ITEM(feet, i, foot);
		PyUnicode_WRITE(PyUnicode_1BYTE_KIND, PyUnicode_DATA(letters), i, e->letter);
	}
	out = Py_BuildValue("(OOOOK)", names, sizes, letters, feet, s->skipped);
done:
	Py_XDECREF(names);
	Py_XDECREF(sizes);
	Py_XDECREF(feet);
	Py_XDECREF(letters);
	return out;
}

/* The entry named NAME (LEN bytes, hash HASH) in S, or NULL. */
struct entry *summary_find(Summary *s, const char *name, Py_ssize_t len, uint64_t hash)
{
	Py_ssize_t j;

	if (!s->nslots)
		return NULL;
	for (j = hash & (s->nslots - 1); s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
		struct entry *e = &s->entries[s->slots[j] - 1];

		if (e->hash == hash && e->len == len && memcmp(s->arena + e->off, name, len) == 0)
			return e;
	}
	return NULL;
}

static PyObject *summary_dumps(Summary *s, PyObject *unused)
{
	/* an empty summary has no buffers yet: y# would make None of a NULL pointer */
	return Py_BuildValue("(y#y#K)", s->arena ? s->arena : "", s->arena_len,
			     s->entries ? (const char *)s->entries : "", s->n * (Py_ssize_t)sizeof(struct entry),
			     s->skipped);
}

/* Summary.loads((arena, entries, skipped)): a summary made by dumps() in this program (a fork). */
static PyObject *summary_loads(PyTypeObject *type, PyObject *args)
{
	Py_buffer arena, entries;
	unsigned long long skipped;
	Summary *s;
	Py_ssize_t i;

	if (!PyArg_ParseTuple(args, "(y*y*K)", &arena, &entries, &skipped))
		return NULL;
	s = (Summary *)type->tp_alloc(type, 0);
	if (!s)
		goto done;
	s->prefixes = PyTuple_New(0);
	s->names = PyTuple_New(0);
	s->skipped = skipped;
	s->n = s->cap = entries.len / (Py_ssize_t)sizeof(struct entry);
	s->arena_len = s->arena_cap = arena.len;
	s->arena = PyMem_RawMalloc(arena.len + 1);
	s->entries = PyMem_RawMalloc(entries.len + 1);
	if (!s->prefixes || !s->names || !s->arena || !s->entries) {
		Py_CLEAR(s);
		PyErr_NoMemory();
		goto done;
	}
	memcpy(s->arena, arena.buf, arena.len);
	memcpy(s->entries, entries.buf, entries.len);
	for (i = 0; i < s->n; i++)
		if (s->entries[i].off < 0 || s->entries[i].len < 0 || s->entries[i].off + s->entries[i].len > arena.len) {
			Py_CLEAR(s);
			PyErr_SetString(PyExc_ValueError, "Summary.loads: not a dump of this program's");
			goto done;
		}
	if (summary_grow(s, s->n) < 0) {
		Py_CLEAR(s);
		PyErr_NoMemory();
	}
done:
	PyBuffer_Release(&arena);
	PyBuffer_Release(&entries);
	return (PyObject *)s;
}

static PyObject *entry_name(Summary *s, struct entry *e)
{
	return PyUnicode_DecodeUTF8(s->arena + e->off, e->len, "surrogateescape");
}

/* MATCH(name) for a filter, or 1 without one; -1 with an exception set. */
static int matches(Summary *s, struct entry *e, PyObject *match)
{
	PyObject *name, *r;
	int ok;

	if (match == Py_None)
		return 1;
	name = entry_name(s, e);
	if (!name)
		return -1;
	r = PyObject_CallOneArg(match, name);
	Py_DECREF(name);
	if (!r)
		return -1;
	ok = PyObject_IsTrue(r);
	Py_DECREF(r);
	return ok;
}

enum { NAME, OLD, NEW, DELTA, OLD_LETTER, NEW_LETTER, OLD_FOOT, NEW_FOOT, NCOLS };

static int append_new(PyObject *list, PyObject *item)	/* steals ITEM */
{
	int r = item ? PyList_Append(list, item) : -1;

	Py_XDECREF(item);
	return r;
}

static PyObject *size_or_none(struct entry *e, int foot)
{
	return e ? PyLong_FromUnsignedLongLong(foot ? e->foot : e->size) : Py_NewRef(Py_None);
}

/* One row of the table: a name in OLD (A), NEW (B) or both, with different sizes. */
static int add_row(PyObject **cols, int extras, Summary *s, struct entry *a, struct entry *b)
{
	long long delta = (b ? (long long)b->size : 0) - (a ? (long long)a->size : 0);

	if (append_new(cols[NAME], entry_name(s, a ? a : b)) < 0 || append_new(cols[OLD], size_or_none(a, 0)) < 0 ||
	    append_new(cols[NEW], size_or_none(b, 0)) < 0 || append_new(cols[DELTA], PyLong_FromLongLong(delta)) < 0)
		return -1;
	if (!extras)
		return 0;
	if (append_new(cols[OLD_LETTER], a ? PyUnicode_FromOrdinal(a->letter) : Py_NewRef(Py_None)) < 0 ||
	    append_new(cols[NEW_LETTER], b ? PyUnicode_FromOrdinal(b->letter) : Py_NewRef(Py_None)) < 0 ||
	    append_new(cols[OLD_FOOT], size_or_none(a, 1)) < 0 || append_new(cols[NEW_FOOT], size_or_none(b, 1)) < 0)
		return -1;
	return 0;
}

PyDoc_STRVAR(diff_doc,
"old.diff(new, match=None, extras=False)\n"
"-> (columns, (add, remove, grow, shrink, up, down, total_old, total_new))\n\n"
"bloat-o-meter's calc() in C, unsorted: the names whose summed size differs between OLD and\n"
"NEW (in one only, or in both with different sizes) as columns: name, old size, new size (None\n"
"where a side lacks the name), delta, and with EXTRAS old and new nm letter and footprint; then\n"
"its counts and each side's total. MATCH: None, or a callable that keeps a name (rows, counts\n"
"and totals) when it returns true.");

static PyObject *summary_diff(Summary *old, PyObject *args)
{
	Summary *new;
	PyObject *match = Py_None, *cols[NCOLS] = { NULL }, *table = NULL, *out = NULL;
	unsigned long long total_old = 0, total_new = 0, up = 0, down = 0;
	Py_ssize_t i, add = 0, remove = 0, grow = 0, shrink = 0;
	int m, extras = 0;

	if (!PyArg_ParseTuple(args, "O!|Op", &SummaryType, &new, &match, &extras))
		return NULL;
	for (i = 0; i < NCOLS; i++)
		if (!(cols[i] = PyList_New(0)))
			goto done;
	for (i = 0; i < old->n; i++) {
		struct entry *a = &old->entries[i], *b;

		if ((m = matches(old, a, match)) < 0)
			goto done;
		if (!m)
			continue;
		total_old += a->size;
		b = summary_find(new, old->arena + a->off, a->len, a->hash);
		if (b && b->size == a->size)
			continue;
		if (!b) {
			remove++;
			down += a->size;
		} else if (b->size > a->size) {
			grow++;
			up += b->size - a->size;
		} else {
			shrink++;
			down += a->size - b->size;
		}
		if (add_row(cols, extras, old, a, b) < 0)
			goto done;
	}
	for (i = 0; i < new->n; i++) {
		struct entry *b = &new->entries[i];

		if ((m = matches(new, b, match)) < 0)
			goto done;
		if (!m)
			continue;
		total_new += b->size;
		if (summary_find(old, new->arena + b->off, b->len, b->hash))
			continue;
		add++;
		up += b->size;
		if (add_row(cols, extras, new, NULL, b) < 0)
			goto done;
	}
	table = PyTuple_New(extras ? NCOLS : OLD_LETTER);
	if (!table)
		goto done;
	for (i = 0; i < PyTuple_GET_SIZE(table); i++)
		PyTuple_SET_ITEM(table, i, Py_NewRef(cols[i]));
	out = Py_BuildValue("(O(nnnnKKKK))", table, add, remove, grow, shrink, up, down, total_old, total_new);
done:
	for (i = 0; i < NCOLS; i++)
		Py_XDECREF(cols[i]);
	Py_XDECREF(table);
	return out;
}

static PyObject *summary_total(Summary *s, PyObject *unused)
{
	unsigned long long total = 0;
	Py_ssize_t i;

	for (i = 0; i < s->n; i++)
		total += s->entries[i].size;
	return PyLong_FromUnsignedLongLong(total);
}

static PyObject *summary_size_of(Summary *s, PyObject *args)
{
	Py_buffer part;
	PyObject *match = Py_None;
	unsigned long long total = 0;
	Py_ssize_t i;
	int m;

	if (!PyArg_ParseTuple(args, "y*|O", &part, &match))
		return NULL;
	if (s->cold_counted && match == Py_None && part.len == 5 && memcmp(part.buf, ".cold", 5) == 0) {
		PyBuffer_Release(&part);
		return PyLong_FromUnsignedLongLong(s->cold);
	}
	for (i = 0; i < s->n; i++) {
		struct entry *e = &s->entries[i];
		const char *name = s->arena + e->off, *at;

		/* memchr first: most names hold no '.', and memmem's set-up per name was 3 % of the text format */
		if (part.len > e->len)
			continue;
		if (part.len && (!(at = memchr(name, *(const char *)part.buf, e->len)) ||
				 !memmem(at, name + e->len - at, part.buf, part.len)))
			continue;
		if ((m = matches(s, e, match)) < 0) {
			PyBuffer_Release(&part);
			return NULL;
		}
		if (m)
			total += e->size;
	}
	PyBuffer_Release(&part);
	return PyLong_FromUnsignedLongLong(total);
}

static PyMethodDef summary_methods[] = {
	{ "result", (PyCFunction)summary_result, METH_NOARGS, "(names, sizes, letters, footprints, skipped)" },
	{ "dumps", (PyCFunction)summary_dumps, METH_NOARGS, "(arena, entries, skipped): for Summary.loads in a fork" },
	{ "loads", (PyCFunction)summary_loads, METH_VARARGS | METH_CLASS, "Summary.loads(dumps()): the same summary" },
	{ "diff", (PyCFunction)summary_diff, METH_VARARGS, diff_doc },
	{ "bom_text", (PyCFunction)summary_bom_text, METH_VARARGS, bom_text_doc },
	{ "text_block", (PyCFunction)summary_text_block, METH_VARARGS, text_block_doc },
	{ "total", (PyCFunction)summary_total, METH_NOARGS, "the summed size of every name" },
	{ "size_of", (PyCFunction)summary_size_of, METH_VARARGS, "size_of(part, match=None): the summed size of the names containing PART (that MATCH keeps)" },
	{ NULL, NULL, 0, NULL },
};

static PyMemberDef summary_members[] = {
	{ "skipped", T_ULONGLONG, offsetof(Summary, skipped), READONLY,
	  "bytes of code-letter symbols bloat-o-meter's rules skipped" },
	{ NULL, 0, 0, 0, NULL },
};

PyTypeObject SummaryType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "flagbench.elf._symtab.Summary",
	.tp_doc = summary_doc,
	.tp_basicsize = sizeof(Summary),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)summary_init,
	.tp_dealloc = (destructor)summary_dealloc,
	.tp_methods = summary_methods,
	.tp_members = summary_members,
};
