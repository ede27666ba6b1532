/*
 * The per-entry loops of flagbench.elf.tables, in C.
 *
 * `flagbench size` promises to be several times faster than bloat-o-meter on a vmlinux pair
 * (30k symbols; bloat-o-meter takes about half a second) and on LLVM's static archives (2,500
 * members, 600k symbols). Python spends a few hundred nanoseconds on every step of every
 * symbol, and importing numpy alone costs a fifth of bloat-o-meter's whole vmlinux run, so the
 * loops over section headers and symbol-table entries live here.
 *
 * What the rules are stays in Python: nm's letters come in as lookup tables built from
 * elf.symbols and elf.sections, a section whose letter depends on its name is asked of a
 * Python callback, and the section groups are passed in as data. The Python reader opens the
 * file, checks every table's bounds and type, and hands over the bytes; this code still checks
 * every offset it follows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHF_WRITE 0x1
#define SHF_ALLOC 0x2
#define SHF_EXECINSTR 0x4
#define SHT_NOBITS 8
#define SHT_REL 9
#define SHT_RELA 4
#define SHT_SYMTAB_SHNDX 18
#define SHN_LORESERVE 0xff00
#define SHN_XINDEX 0xffff
#define UNKNOWN 0xff

struct elf {
	const uint8_t *shdrs, *syms, *str, *shstr;
	Py_ssize_t shnum, nsyms, strsize, shstrsize;
	int is64, big;
};

static uint64_t rd(const uint8_t *p, int n, int big)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
	return v;
}

/* Section header fields: Elf64 and Elf32 put them at different offsets and widths. */
enum { SH_NAME, SH_TYPE, SH_FLAGS, SH_ADDR, SH_OFFSET, SH_SIZE, SH_LINK };
static const int sh64_off[] = { 0, 4, 8, 16, 24, 32, 40 }, sh64_len[] = { 4, 4, 8, 8, 8, 8, 4 };

static uint64_t sh(const struct elf *e, Py_ssize_t i, int field)
{
	if (e->is64)
		return rd(e->shdrs + 64 * i + sh64_off[field], sh64_len[field], e->big);
	return rd(e->shdrs + 40 * i + 4 * field, 4, e->big);
}

/* Symbol-table entry fields. */
static uint32_t sym_name(const struct elf *e, Py_ssize_t k)
{
	return rd(e->syms + (e->is64 ? 24 : 16) * k, 4, e->big);
}

static uint8_t sym_info(const struct elf *e, Py_ssize_t k)
{
	return e->syms[e->is64 ? 24 * k + 4 : 16 * k + 12];
}

static uint32_t sym_shndx(const struct elf *e, Py_ssize_t k)
{
	return rd(e->syms + (e->is64 ? 24 * k + 6 : 16 * k + 14), 2, e->big);
}

static uint64_t sym_value(const struct elf *e, Py_ssize_t k)
{
	return e->is64 ? rd(e->syms + 24 * k + 8, 8, e->big) : rd(e->syms + 16 * k + 4, 4, e->big);
}

static uint64_t sym_size(const struct elf *e, Py_ssize_t k)
{
	return e->is64 ? rd(e->syms + 24 * k + 16, 8, e->big) : rd(e->syms + 16 * k + 8, 4, e->big);
}

static int coff_name(const uint8_t *name, Py_ssize_t left)
{
	static const char *prefixes[] = { ".dr", ".ed", ".id", ".pd" };
	int i;

	for (i = 0; i < 4; i++)
		if (left >= 3 && memcmp(name, prefixes[i], 3) == 0)
			return 1;
	return 0;
}

/*
 * The letter code of section I (0: nm lists no symbol of it), worked out on first use:
 * from flags and type through BASE, or through the Python callback NAME_CODE when the name
 * decides (unallocated sections with contents, COFF names). -1 with an exception set.
 */
static int section_code(const struct elf *e, uint8_t *codes, Py_ssize_t i, uint32_t symtab,
			const uint8_t *base, PyObject *name_code)
{
	uint64_t flags, type, name;
	PyObject *r;
	long code;

	if (codes[i] != UNKNOWN)
		return codes[i];
	type = sh(e, i, SH_TYPE);
	flags = sh(e, i, SH_FLAGS);
	name = sh(e, i, SH_NAME);
	if (type == SHT_SYMTAB_SHNDX ||
	    ((type == SHT_REL || type == SHT_RELA) && sh(e, i, SH_LINK) == symtab && !(flags & SHF_ALLOC))) {
		codes[i] = 0;
		return 0;
	}
	if (name >= (uint64_t)e->shstrsize) {
		PyErr_SetString(PyExc_ValueError, "section name offset past the section name table");
		return -1;
	}
	if ((!(flags & SHF_ALLOC) && type != SHT_NOBITS && !(flags & SHF_EXECINSTR)) ||
	    coff_name(e->shstr + name, e->shstrsize - name)) {
		const char *s = (const char *)e->shstr + name;

		r = PyObject_CallFunction(name_code, "KKy#", (unsigned long long)type, (unsigned long long)flags,
					  s, (Py_ssize_t)strnlen(s, e->shstrsize - name));
		if (!r)
			return -1;
		code = PyLong_AsLong(r);
		Py_DECREF(r);
		if (code < 0 || code > 15) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "name_code out of range");
			return -1;
		}
		codes[i] = (uint8_t)code;
		return codes[i];
	}
	codes[i] = base[(flags & 7) | (type == SHT_NOBITS ? 8 : 0)];
	return codes[i];
}

struct span {
	uint64_t start, end;
	uint32_t sec;
	Py_ssize_t k;
};

static int span_order(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;	/* the longest first */
	return x->k < y->k ? -1 : x->k > y->k;
}

/*
 * Padding after each listed symbol, over the executable sections: symbols walked by start
 * address; bytes between the furthest end of the sized symbols so far and the next start (or
 * the section end) are padding, given to the symbol that reached furthest. A region starting
 * at an unsized symbol is code we cannot size, not padding. GAP gets the bytes per listed
 * symbol; *COVERED the code bytes inside sized symbols, *PADDING the padding bytes.
 */
static int gaps(const struct elf *e, struct span *spans, Py_ssize_t n, uint64_t *gap,
		unsigned long long *covered, unsigned long long *padding)
{
	uint64_t reach = 0, start, end, next, from;
	Py_ssize_t i, owner = -1;

	qsort(spans, n, sizeof(*spans), span_order);
	for (i = 0; i < n; i++) {
		if (i == 0 || spans[i - 1].sec != spans[i].sec) {
			reach = 0;
			owner = -1;
		}
		start = spans[i].start;
		end = spans[i].end;
		from = start > reach ? start : reach;
		if (end > from)
			*covered += end - from;
		if (end > start && end >= reach) {
			reach = end;
			owner = spans[i].k;
		}
		if (reach > start && owner >= 0) {
			next = (i + 1 < n && spans[i + 1].sec == spans[i].sec) ? spans[i + 1].start :
			       sh(e, spans[i].sec, SH_SIZE);
			if (next > reach) {
				gap[owner] += next - reach;
				*padding += next - reach;
			}
		}
	}
	return 0;
}

static PyObject *list_of(const uint64_t *v, Py_ssize_t n)
{
	PyObject *list = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; list && i < n; i++) {
		PyObject *x = PyLong_FromUnsignedLongLong(v[i]);

		if (!x) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, x);
	}
	return list;
}

/*
 * Summary: one bloat-o-meter table being filled, symbol by symbol, in C. A symbol of one of
 * the table's letters is skipped by bloat-o-meter's rules (a ':' anywhere, a skipped prefix,
 * a skipped exact name: passed in from flagbench.size.rules) or renamed (every '.' followed by
 * digits removed, as `re.sub(r"\.[0-9]+", "", name)`), then summed under that name. Python
 * objects are made once per distinct name, at the end.
 */
struct entry {
	uint64_t hash, size, foot;
	Py_ssize_t off, len;
	uint8_t letter;
};

static PyTypeObject SummaryType;

typedef struct {
	PyObject_HEAD
	uint8_t wanted[256], code[256];
	PyObject *prefixes, *names;	/* tuples of bytes */
	char *arena;
	Py_ssize_t arena_len, arena_cap;
	struct entry *entries;
	Py_ssize_t n, cap;
	Py_ssize_t *slots;		/* open addressing: entry index + 1, 0 empty */
	Py_ssize_t nslots;
	unsigned long long skipped;
} Summary;

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
	Py_XSETREF(self->prefixes, Py_NewRef(prefixes));
	Py_XSETREF(self->names, Py_NewRef(names));
	return 0;
bad:
	PyErr_SetString(PyExc_TypeError, "Summary: skip rules must be bytes");
	return -1;
}

static void summary_dealloc(Summary *self)
{
	Py_XDECREF(self->prefixes);
	Py_XDECREF(self->names);
	PyMem_Free(self->arena);
	PyMem_Free(self->entries);
	PyMem_Free(self->slots);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int skipped_name(Summary *s, const char *name, Py_ssize_t len)
{
	Py_ssize_t i;

	if (memchr(name, ':', len))
		return 1;
	for (i = 0; i < PyTuple_GET_SIZE(s->prefixes); i++) {
		PyObject *p = PyTuple_GET_ITEM(s->prefixes, i);

		if (len >= PyBytes_GET_SIZE(p) && memcmp(name, PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p)) == 0)
			return 1;
	}
	for (i = 0; i < PyTuple_GET_SIZE(s->names); i++) {
		PyObject *p = PyTuple_GET_ITEM(s->names, i);

		if (len == PyBytes_GET_SIZE(p) && memcmp(name, PyBytes_AS_STRING(p), len) == 0)
			return 1;
	}
	return 0;
}

/* Rehash into a slot table of at least twice the entries (a power of two, 1024 or more). */
static int summary_grow(Summary *s)
{
	Py_ssize_t nslots = 1024, i;
	Py_ssize_t *slots;

	while (nslots < 2 * (s->n + 1))
		nslots *= 2;
	if (nslots <= s->nslots)
		nslots = 2 * s->nslots;
	slots = PyMem_Calloc(nslots, sizeof(*slots));

	if (!slots)
		return -1;
	for (i = 0; i < s->n; i++) {
		Py_ssize_t j = s->entries[i].hash & (nslots - 1);

		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = i + 1;
	}
	PyMem_Free(s->slots);
	s->slots = slots;
	s->nslots = nslots;
	return 0;
}

/* Add one sized symbol (its raw name) to the table; -1 with an exception set. */
static int summary_add(Summary *s, const char *raw, Py_ssize_t rawlen, uint64_t size, uint64_t gap, uint8_t letter)
{
	const char *name = raw;
	Py_ssize_t len = rawlen, i, j;
	uint64_t hash = 1469598103934665603ULL;
	struct entry *e;

	if (!s->wanted[letter])
		return 0;
	if (skipped_name(s, raw, rawlen)) {
		if (s->code[letter])
			s->skipped += size;
		return 0;
	}
	if (s->arena_len + rawlen > s->arena_cap) {	/* room to write the renamed name at the end */
		Py_ssize_t cap = 2 * (s->arena_cap + rawlen) + 4096;
		char *arena = PyMem_Realloc(s->arena, cap);

		if (!arena)
			return PyErr_NoMemory(), -1;
		s->arena = arena;
		s->arena_cap = cap;
	}
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
	}
	for (i = 0; i < len; i++)
		hash = (hash ^ (uint8_t)name[i]) * 1099511628211ULL;
	if (2 * (s->n + 1) > s->nslots && summary_grow(s) < 0)
		return PyErr_NoMemory(), -1;
	for (j = hash & (s->nslots - 1); s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
		e = &s->entries[s->slots[j] - 1];
		if (e->hash == hash && e->len == len && memcmp(s->arena + e->off, name, len) == 0) {
			e->size += size;
			e->foot += size + gap;
			return 0;
		}
	}
	if (s->n == s->cap) {
		Py_ssize_t cap = s->cap ? 2 * s->cap : 1024;
		struct entry *entries = PyMem_Realloc(s->entries, cap * sizeof(*entries));

		if (!entries)
			return PyErr_NoMemory(), -1;
		s->entries = entries;
		s->cap = cap;
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
static struct entry *summary_find(Summary *s, const char *name, Py_ssize_t len, uint64_t hash)
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
	s->arena = PyMem_Malloc(arena.len + 1);
	s->entries = PyMem_Malloc(entries.len + 1);
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
	if (summary_grow(s) < 0) {
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

static PyObject *summary_size_of(Summary *s, PyObject *args)
{
	Py_buffer part;
	PyObject *match = Py_None;
	unsigned long long total = 0;
	Py_ssize_t i;
	int m;

	if (!PyArg_ParseTuple(args, "y*|O", &part, &match))
		return NULL;
	for (i = 0; i < s->n; i++) {
		struct entry *e = &s->entries[i];

		if (part.len > e->len || !memmem(s->arena + e->off, e->len, part.buf, part.len))
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
	{ "size_of", (PyCFunction)summary_size_of, METH_VARARGS, "size_of(part, match=None): the summed size of the names containing PART (that MATCH keeps)" },
	{ NULL, NULL, 0, NULL },
};

static PyMemberDef summary_members[] = {
	{ "skipped", T_ULONGLONG, offsetof(Summary, skipped), READONLY,
	  "bytes of code-letter symbols bloat-o-meter's rules skipped" },
	{ "count", T_PYSSIZET, offsetof(Summary, n), READONLY, "distinct names" },
	{ NULL, 0, 0, 0, NULL },
};

static PyTypeObject SummaryType = {
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

PyDoc_STRVAR(symbols_doc,
"symbols(shdrs, syms, strtab, shstr, is64, big, nosec, common, letters, base, name_code, xindex,\n"
"        sized_only, full, relocatable, thumb, summaries)\n"
"-> (names, letters, sizes, values, sections, gaps, covered, padding)\n\n"
"The symbols nm lists of one member, in symbol-table order (entry 0 skipped): names (str),\n"
"letters (bytes, one per symbol), sizes; with FULL also values (Thumb bit cleared when THUMB),\n"
"section indices (-1: common), the padding after each symbol, and the code bytes covered by\n"
"sized symbols and in padding (else None, None, None, 0, 0). NOSEC: the indices of sections\n"
"nm makes no section of (0, symbol table, its strings, section names); COMMON: the reserved\n"
"indices nm files as common; LETTERS: 4096 bytes, the letter (0: not listed) by\n"
"st_info << 4 | section code; BASE: 16 bytes, a section's code by flags & 7 | NOBITS << 3;\n"
"NAME_CODE(type, flags, name) gives the code where the name decides; XINDEX: the\n"
"SHT_SYMTAB_SHNDX words (native order) or None. SUMMARIES: None, or a tuple of Summary that\n"
"the sized symbols are added to instead (names, letters, sizes, values, sections and gaps then\n"
"come back None).");

static PyObject *symbols(PyObject *self, PyObject *args)
{
	Py_buffer b_sh, b_sym, b_str, b_shstr, b_letters, b_base, b_x = { 0 };
	PyObject *nosec, *common, *name_code, *xindex, *summaries, *out = NULL;
	PyObject *names = NULL, *letters = NULL, *sizes = NULL, *values = NULL, *secs = NULL, *gap_list = NULL;
	int is64, big, sized_only, full, relocatable, thumb;
	struct elf e;
	uint8_t *codes = NULL, *letter = NULL;
	uint64_t *size_v = NULL, *value_v = NULL, *gap_v = NULL;
	uint32_t *name_v = NULL;
	int64_t *sec_v = NULL;
	struct span *spans = NULL;
	Py_ssize_t k, i, n = 0, nspans = 0;
	unsigned long long covered = 0, padding = 0;
	uint32_t symtab = 0;

	if (!PyArg_ParseTuple(args, "y*y*y*y*ppOOy*y*OOppppO", &b_sh, &b_sym, &b_str, &b_shstr, &is64, &big,
			      &nosec, &common, &b_letters, &b_base, &name_code, &xindex, &sized_only, &full,
			      &relocatable, &thumb, &summaries))
		return NULL;
	e.shdrs = b_sh.buf;
	e.syms = b_sym.buf;
	e.str = b_str.buf;
	e.shstr = b_shstr.buf;
	e.is64 = is64;
	e.big = big;
	e.shnum = b_sh.len / (is64 ? 64 : 40);
	e.nsyms = b_sym.len / (is64 ? 24 : 16);
	e.strsize = b_str.len;
	e.shstrsize = b_shstr.len;
	if (summaries == Py_None)
		summaries = NULL;
	if (b_letters.len != 4096 || b_base.len != 16 || !PyTuple_Check(nosec) || !PyTuple_Check(common) ||
	    (summaries && !PyTuple_Check(summaries))) {
		PyErr_SetString(PyExc_TypeError, "symbols: bad lookup tables");
		goto done;
	}
	if (xindex != Py_None && PyObject_GetBuffer(xindex, &b_x, PyBUF_SIMPLE) < 0)
		goto done;
	codes = PyMem_Malloc(e.shnum + 1);
	letter = PyMem_Malloc(e.nsyms + 1);
	size_v = PyMem_Malloc(sizeof(*size_v) * (e.nsyms + 1));
	value_v = PyMem_Malloc(sizeof(*value_v) * (e.nsyms + 1));
	gap_v = PyMem_Calloc(e.nsyms + 1, sizeof(*gap_v));
	sec_v = PyMem_Malloc(sizeof(*sec_v) * (e.nsyms + 1));
	name_v = PyMem_Malloc(sizeof(*name_v) * (e.nsyms + 1));
	spans = full ? PyMem_Malloc(sizeof(*spans) * (e.nsyms + 1)) : NULL;
	names = PyList_New(0);
	if (!codes || !letter || !size_v || !value_v || !gap_v || !sec_v || !name_v || (full && !spans) || !names) {
		PyErr_NoMemory();
		goto done;
	}
	memset(codes, UNKNOWN, e.shnum + 1);
	for (i = 0; i < PyTuple_GET_SIZE(nosec); i++) {
		long s = PyLong_AsLong(PyTuple_GET_ITEM(nosec, i));

		if (s >= 0 && s < e.shnum)
			codes[s] = 0;
		if (i == 1)
			symtab = (uint32_t)s;
	}
	if (PyErr_Occurred())
		goto done;

	for (k = 1; k < e.nsyms; k++) {
		uint64_t size = sym_size(&e, k);
		uint32_t shndx = sym_shndx(&e, k), real = shndx, name;
		uint8_t info = sym_info(&e, k);
		int code = 0, is_common = 0;
		const char *s;
		PyObject *str;

		if (sized_only && !size)
			continue;
		if (shndx == SHN_XINDEX && b_x.buf && (Py_ssize_t)(4 * k + 4) <= b_x.len)
			real = ((const uint32_t *)b_x.buf)[k];
		else if (shndx == SHN_XINDEX)
			real = 0;
		if (shndx >= SHN_LORESERVE && shndx != SHN_XINDEX) {
			for (i = 0; i < PyTuple_GET_SIZE(common); i++)
				if (PyLong_AsLong(PyTuple_GET_ITEM(common, i)) == shndx)
					is_common = 1;
			code = is_common ? 11 : 0;	/* elf.tables.LETTER_CODES: COMMON is last */
		} else if (real > 0 && real < e.shnum) {
			code = section_code(&e, codes, real, symtab, b_base.buf, name_code);
			if (code < 0)
				goto done;
		}
		letter[n] = ((const uint8_t *)b_letters.buf)[(Py_ssize_t)info << 4 | code];
		if (!letter[n])
			continue;
		name = sym_name(&e, k);
		if (name >= (uint64_t)e.strsize) {
			PyErr_SetString(PyExc_ValueError, "symbol name offset past the string table");
			goto done;
		}
		name_v[n] = name;
		if (!summaries) {
			s = (const char *)e.str + name;
			str = PyUnicode_DecodeUTF8(s, strnlen(s, e.strsize - name), "surrogateescape");
			if (!str || PyList_Append(names, str) < 0) {
				Py_XDECREF(str);
				goto done;
			}
			Py_DECREF(str);
		}
		size_v[n] = size;
		if (full) {
			uint64_t v = sym_value(&e, k);

			if (thumb && ((info & 0xf) == 2 || (info & 0xf) == 10))	/* STT_FUNC, STT_GNU_IFUNC */
				v &= ~(uint64_t)1;
			value_v[n] = v;
			sec_v[n] = is_common ? -1 : (int64_t)real;
			if (!is_common && real > 0 && real < e.shnum &&
			    (sh(&e, real, SH_FLAGS) & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR)) {
				uint64_t end_sec = sh(&e, real, SH_SIZE);
				uint64_t start = relocatable ? v : v - sh(&e, real, SH_ADDR);

				if (!relocatable && v < sh(&e, real, SH_ADDR))
					start = 0;
				if (start > end_sec)
					start = end_sec;
				spans[nspans].start = start;
				spans[nspans].end = size > end_sec - start ? end_sec : start + size;
				spans[nspans].sec = real;
				spans[nspans].k = n;
				nspans++;
			}
		}
		n++;
	}
	if (full)
		gaps(&e, spans, nspans, gap_v, &covered, &padding);
	if (summaries) {
		for (k = 0; k < n; k++) {
			const char *nm = (const char *)e.str + name_v[k];
			Py_ssize_t len = strnlen(nm, e.strsize - name_v[k]);

			if (!size_v[k])
				continue;
			for (i = 0; i < PyTuple_GET_SIZE(summaries); i++) {
				PyObject *sum = PyTuple_GET_ITEM(summaries, i);

				if (!PyObject_TypeCheck(sum, &SummaryType)) {
					PyErr_SetString(PyExc_TypeError, "summaries: a tuple of Summary");
					goto done;
				}
				if (summary_add((Summary *)sum, nm, len, size_v[k], gap_v[k], letter[k]) < 0)
					goto done;
			}
		}
		out = Py_BuildValue("(OOOOOOKK)", Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, covered, padding);
		goto done;
	}

	letters = PyBytes_FromStringAndSize((const char *)letter, n);
	sizes = list_of(size_v, n);
	if (!letters || !sizes)
		goto done;
	if (full) {
		values = list_of(value_v, n);
		gap_list = list_of(gap_v, n);
		secs = PyList_New(n);
		for (k = 0; secs && k < n; k++) {
			PyObject *x = PyLong_FromLongLong(sec_v[k]);

			if (!x) {
				Py_CLEAR(secs);
				break;
			}
			PyList_SET_ITEM(secs, k, x);
		}
		if (!values || !gap_list || !secs)
			goto done;
	} else {
		values = Py_NewRef(Py_None);
		secs = Py_NewRef(Py_None);
		gap_list = Py_NewRef(Py_None);
	}
	out = Py_BuildValue("(OOOOOOKK)", names, letters, sizes, values, secs, gap_list, covered, padding);
done:
	Py_XDECREF(names);
	Py_XDECREF(letters);
	Py_XDECREF(sizes);
	Py_XDECREF(values);
	Py_XDECREF(secs);
	Py_XDECREF(gap_list);
	PyMem_Free(codes);
	PyMem_Free(letter);
	PyMem_Free(size_v);
	PyMem_Free(value_v);
	PyMem_Free(gap_v);
	PyMem_Free(sec_v);
	PyMem_Free(name_v);
	PyMem_Free(spans);
	if (b_x.obj)
		PyBuffer_Release(&b_x);
	PyBuffer_Release(&b_sh);
	PyBuffer_Release(&b_sym);
	PyBuffer_Release(&b_str);
	PyBuffer_Release(&b_shstr);
	PyBuffer_Release(&b_letters);
	PyBuffer_Release(&b_base);
	return out;
}

PyDoc_STRVAR(section_sizes_doc,
"section_sizes(shdrs, shstr, is64, big, groups) -> ({group: bytes}, text, rodata, data, bss)\n\n"
"The allocated sections' sizes summed by group, and by kind (code, read-only data, data, no\n"
"contents). GROUPS: (prefix bytes, group name, whole_word) in the order tried; a name is in\n"
"the first group it starts with (followed by '.' or its end when WHOLE_WORD), else its own.");

static PyObject *section_sizes(PyObject *self, PyObject *args)
{
	Py_buffer b_sh, b_shstr;
	PyObject *groups, *sections = NULL, *out = NULL;
	int is64, big;
	struct elf e = { 0 };
	unsigned long long kind[4] = { 0 };
	Py_ssize_t i, g;

	if (!PyArg_ParseTuple(args, "y*y*ppO", &b_sh, &b_shstr, &is64, &big, &groups))
		return NULL;
	e.shdrs = b_sh.buf;
	e.shstr = b_shstr.buf;
	e.is64 = is64;
	e.big = big;
	e.shnum = b_sh.len / (is64 ? 64 : 40);
	e.shstrsize = b_shstr.len;
	sections = PyDict_New();
	if (!sections || !PyTuple_Check(groups))
		goto done;
	for (i = 1; i < e.shnum; i++) {
		uint64_t flags = sh(&e, i, SH_FLAGS), size = sh(&e, i, SH_SIZE), name = sh(&e, i, SH_NAME);
		const char *s;
		Py_ssize_t len;
		PyObject *key = NULL, *old, *sum;

		if (!(flags & SHF_ALLOC))
			continue;
		if (name >= (uint64_t)e.shstrsize) {
			PyErr_SetString(PyExc_ValueError, "section name offset past the section name table");
			goto done;
		}
		kind[flags & SHF_EXECINSTR ? 0 : sh(&e, i, SH_TYPE) == SHT_NOBITS ? 3 : flags & SHF_WRITE ? 2 : 1] += size;
		s = (const char *)e.shstr + name;
		len = strnlen(s, e.shstrsize - name);
		for (g = 0; g < PyTuple_GET_SIZE(groups) && !key; g++) {
			PyObject *rule = PyTuple_GET_ITEM(groups, g);
			const char *p = PyBytes_AS_STRING(PyTuple_GET_ITEM(rule, 0));
			Py_ssize_t plen = PyBytes_GET_SIZE(PyTuple_GET_ITEM(rule, 0));
			int whole = PyObject_IsTrue(PyTuple_GET_ITEM(rule, 2));

			if (len >= plen && memcmp(s, p, plen) == 0 && (!whole || len == plen || s[plen] == '.'))
				key = Py_NewRef(PyTuple_GET_ITEM(rule, 1));
		}
		if (!key)
			key = PyUnicode_DecodeUTF8(s, len, "replace");
		if (!key)
			goto done;
		old = PyDict_GetItemWithError(sections, key);
		sum = old ? PyNumber_Add(old, PyLong_FromUnsignedLongLong(size)) : PyLong_FromUnsignedLongLong(size);
		if (!sum || PyDict_SetItem(sections, key, sum) < 0) {
			Py_XDECREF(sum);
			Py_DECREF(key);
			goto done;
		}
		Py_DECREF(sum);
		Py_DECREF(key);
	}
	out = Py_BuildValue("(OKKKK)", sections, kind[0], kind[1], kind[2], kind[3]);
done:
	Py_XDECREF(sections);
	PyBuffer_Release(&b_sh);
	PyBuffer_Release(&b_shstr);
	return out;
}

static PyMethodDef methods[] = {
	{ "symbols", symbols, METH_VARARGS, symbols_doc },
	{ "section_sizes", section_sizes, METH_VARARGS, section_sizes_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "flagbench.elf._symtab",
	.m_doc = "The per-entry loops of flagbench.elf.tables.",
	.m_size = -1,
	.m_methods = methods,
};

PyMODINIT_FUNC PyInit__symtab(void)
{
	PyObject *m;

	if (PyType_Ready(&SummaryType) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (m && PyModule_AddObjectRef(m, "Summary", (PyObject *)&SummaryType) < 0)
		Py_CLEAR(m);
	return m;
}
