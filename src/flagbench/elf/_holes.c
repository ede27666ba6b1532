/*
 * _holes.c: code no sized symbol covers, for asm.unsized, which says what its kinds are
 * (padding, linker stubs, other code) and spells padding per target. Why C: speed. `flagbench
 * size` sorts the holes between a vmlinux's sized code symbols (20,000 of them) into those
 * kinds, and in Python the walk over its symbols, holes and their bytes took about 75 ms a side,
 * more than the rest of its default format. This finds the holes, counts those that are all
 * padding, and hands the rest back cut at their labels and stub symbols, to be sorted into
 * pieces in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_elf.h"

/* Padding as asm.unsized spells it (its _padding_spec): bytes of FILL alone, or a run of tokens. */
struct padding {
	Py_buffer b_fill, b_tokens;
	uint8_t fill[256];		/* whether FILL holds a byte */
	const uint8_t *tokens;		/* GRANULE bytes each; GRANULE 0: x86's NOPs, below */
	Py_ssize_t ntokens;
	int granule;
	unsigned long long run;		/* a run this long or longer is alignment fill */
};

/* The bytes at P (N left) start with the LEN bytes of S: LEN, else 0. */
static Py_ssize_t starts_with(const uint8_t *p, Py_ssize_t n, const char *s, Py_ssize_t len)
{
	return n >= len && p[0] == (uint8_t)s[0] && memcmp(p, s, len) == 0 ? len : 0;
}

/*
 * The length of the x86 NOP spelling at P (N bytes left), 0 when there is none: each of
 * asm.unsized._X86_NOP's spellings, byte for byte (tests hold the two together). Their first
 * bytes decide which one it is, so a run is read left to right without going back.
 */
static Py_ssize_t x86_nop(const uint8_t *p, Py_ssize_t n)
{
	static const char *const fixed[] = { "\x8d\x76\x00", "\x8d\xb4\x26\x00\x00\x00\x00", "\x8d\x74\x26\x00",
					     "\x8d\xb6\x00\x00\x00\x00", "\x87\xdb", "\x87\xc9" };
	static const Py_ssize_t fixed_len[] = { 3, 7, 4, 6, 2, 2 };
	static const char *const modrm[] = { "\x00", "\x40\x00", "\x44\x00\x00", "\x80\x00\x00\x00\x00",
					     "\x84\x00\x00\x00\x00\x00" };
	static const Py_ssize_t modrm_len[] = { 1, 2, 3, 5, 6 };
	Py_ssize_t q = 0, i, m;
	int only_66 = 1;

	if (p[0] == 0xcc || p[0] == 0x00 || p[0] == 0x90)
		return 1;
	if (p[0] == 0x8d || p[0] == 0x87) {
		for (i = 0; i < 6; i++)
			if ((m = starts_with(p, n, fixed[i], fixed_len[i])))
				return m;
		return 0;
	}
	for (; q < n && (p[q] == 0x66 || p[q] == 0x2e); q++)	/* prefixes: 66+ 90, (66|2e)* 0f 1f */
		only_66 &= p[q] == 0x66;
	if (q > 0 && q < n && p[q] == 0x90 && only_66)
		return q + 1;
	if (n - q < 2 || p[q] != 0x0f || p[q + 1] != 0x1f)
		return 0;
	for (i = 0; i < 5; i++)
		if ((m = starts_with(p + q + 2, n - q - 2, modrm[i], modrm_len[i])))
			return q + 2 + m;
	return 0;
}

/* How many of the N bytes at P are FILL bytes before the first that is not (eight at a time where one repeats). */
static Py_ssize_t fill_bytes(const struct padding *r, const uint8_t *p, Py_ssize_t n)
{
	Py_ssize_t i = 0;
	uint64_t same, w;

	while (i < n && r->fill[p[i]])
		for (same = 0x0101010101010101ULL * p[i++]; i + 8 <= n && (memcpy(&w, p + i, 8), w == same); i += 8)
			;
	return i;
}

/*
 * How many bytes from P on (N of them) are padding read left to right: x86's fill bytes and
 * NOPs, else whole tokens; what asm.unsized._padding_regex's match() takes (no spelling is the
 * start of another, so the first one that fits is the one).
 */
static Py_ssize_t padding_head(const struct padding *r, const uint8_t *p, Py_ssize_t n)
{
	Py_ssize_t i = 0, m, t;

	if (!r->granule) {
		for (;;) {
			i += fill_bytes(r, p + i, n - i);
			if (i >= n || !(m = x86_nop(p + i, n - i)))
				return i;
			i += m;
		}
	}
	for (; i + r->granule <= n; i += r->granule) {
		for (t = 0; t < r->ntokens && memcmp(p + i, r->tokens + t * r->granule, r->granule); t++)
			;
		if (t == r->ntokens)
			break;
	}
	return i;
}

/* Whether the N bytes at P are padding, as asm.unsized tests a hole's bytes. */
static int is_padding(const struct padding *r, const uint8_t *p, Py_ssize_t n)
{
	if (!r->granule)	/* x86's fill bytes are one-byte NOPs: the walk takes them */
		return padding_head(r, p, n) == n;
	return fill_bytes(r, p, n) == n || padding_head(r, p, n) == n;
}

/* One scanned section: its index, the address its bytes start at (0 in an object), its size. */
struct scan {
	Py_ssize_t index;
	uint64_t base, size;
};

/* A listed symbol of a scanned section: a sized one's span, or a bound (a label, a stub symbol) that cuts a hole. */
struct mark {
	uint64_t start, size;
	Py_ssize_t k;		/* its place in the listing: symbol order */
	uint32_t slot;		/* its section's place in the scan */
	int stub;
};

/* A span's end: start + size, at most 2^64 - 1 (in Python, past it: the same to every comparison here). */
static uint64_t mark_end(const struct mark *m)
{
	return m->start + m->size < m->start ? UINT64_MAX : m->start + m->size;
}

static uint8_t mark_byte(const struct mark *m, int pass)
{
	return pass < 8 ? (uint8_t)(m->start >> (8 * pass)) : (uint8_t)(m->slot >> (8 * (pass - 8)));
}

/* Sort N marks at M (TMP: room for N) by section and address, symbol order kept among equals. */
RADIX_SORT(sort_by_address, struct mark, mark_byte, 12)

/* A hole: [start, end); whether a bound marks it (asm.unsized._count_padding), whether it is left. */
struct gap {
	uint64_t start, end;
	int marked, left;
};

/* The holes of one scanned section: its spans, bounds and gaps, as places in the arrays of struct holes. */
struct section_holes {
	Py_ssize_t span, nspans, bound, nbounds, gap, ngaps;
	Py_buffer bytes;		/* with COUNT, the section's bytes from READ(index), when it has holes */
};

/* All that code_holes() works with, besides the member's tables. */
struct holes {
	const struct listing *l;
	struct padding pad;
	PyObject *suffixes;		/* a tuple of bytes: the stub symbols' name endings */
	struct scan *scan;
	Py_ssize_t nscan, *slot;	/* SLOT: a section index's place in SCAN, or -1 */
	struct mark *spans, *bounds;
	Py_ssize_t nspans, nbounds;
	struct section_holes *of;	/* per scanned section */
	struct gap *gaps;
	unsigned long long padding, fill;
};

static int padding_from(PyObject *spec, struct padding *r)
{
	Py_ssize_t i;

	memset(r, 0, sizeof(*r));
	if (!PyTuple_Check(spec) ||
	    !PyArg_ParseTuple(spec, "y*iy*K;padding: (fill, granule, tokens, run)", &r->b_fill, &r->granule,
			      &r->b_tokens, &r->run)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "padding: (fill, granule, tokens, run)");
		return -1;
	}
	if (r->granule < 0 || (r->granule && r->b_tokens.len % r->granule)) {
		PyErr_SetString(PyExc_ValueError, "padding: tokens of GRANULE bytes each");
		return -1;
	}
	for (i = 0; i < r->b_fill.len; i++)
		r->fill[((const uint8_t *)r->b_fill.buf)[i]] = 1;
	r->tokens = r->b_tokens.buf;
	r->ntokens = r->granule ? r->b_tokens.len / r->granule : 0;
	return 0;
}

/* H's sections and rules from the arguments; 0, or -1 with an exception set (holes_free undoes it). */
static int holes_from(struct holes *h, const struct elf *e, PyObject *sections, PyObject *spec, PyObject *suffixes)
{
	Py_ssize_t i;

	if (padding_from(spec, &h->pad) < 0)
		return -1;
	for (i = 0; i < PyTuple_GET_SIZE(suffixes); i++)
		if (!PyBytes_Check(PyTuple_GET_ITEM(suffixes, i))) {
			PyErr_SetString(PyExc_TypeError, "suffixes: a tuple of bytes");
			return -1;
		}
	h->suffixes = suffixes;
	h->nscan = PyTuple_GET_SIZE(sections);
	h->scan = PyMem_Malloc(sizeof(*h->scan) * (h->nscan + 1));
	h->slot = PyMem_Malloc(sizeof(*h->slot) * (e->shnum + 1));
	if (!h->scan || !h->slot) {
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < e->shnum; i++)
		h->slot[i] = -1;
	for (i = 0; i < h->nscan; i++) {
		PyObject *item = PyTuple_GET_ITEM(sections, i);
		struct scan *s = &h->scan[i];

		if (!PyTuple_Check(item)) {
			PyErr_SetString(PyExc_TypeError, "sections: (index, base, size) each");
			return -1;
		}
		if (!PyArg_ParseTuple(item, "nKK;sections: (index, base, size) each", &s->index, &s->base, &s->size))
			return -1;
		if (s->index <= 0 || s->index >= e->shnum || h->slot[s->index] >= 0 || s->base + s->size < s->base) {
			PyErr_SetString(PyExc_ValueError, "sections: an index twice or past the section table, or an end "
					"past 2^64");
			return -1;
		}
		h->slot[s->index] = i;
	}
	return 0;
}

static void padding_release(struct padding *r)
{
	if (r->b_fill.obj)
		PyBuffer_Release(&r->b_fill);
	if (r->b_tokens.obj)
		PyBuffer_Release(&r->b_tokens);
}

static void holes_free(struct holes *h)
{
	Py_ssize_t i;

	padding_release(&h->pad);
	for (i = 0; h->of && i < h->nscan; i++)
		if (h->of[i].bytes.obj)
			PyBuffer_Release(&h->of[i].bytes);
	PyMem_Free(h->scan);
	PyMem_Free(h->slot);
	PyMem_RawFree(h->spans);
	PyMem_RawFree(h->bounds);
	PyMem_RawFree(h->of);
	PyMem_RawFree(h->gaps);
}

/*
 * The length of the target's name when NAME (LEN bytes) is a stub symbol's, else 0: "__" TARGET
 * SUFFIX, TARGET not empty and no newline anywhere, as asm.unsized.STUB_SYMBOL matches it (the
 * shortest TARGET: the longest suffix).
 */
static Py_ssize_t stub_target(const struct holes *h, const char *name, Py_ssize_t len)
{
	Py_ssize_t i, best = 0;

	if (len < 3 || name[0] != '_' || name[1] != '_' || memchr(name, '\n', len))
		return 0;
	for (i = 0; i < PyTuple_GET_SIZE(h->suffixes); i++) {
		PyObject *sfx = PyTuple_GET_ITEM(h->suffixes, i);
		Py_ssize_t n = PyBytes_GET_SIZE(sfx);

		if (len - 2 - n >= 1 && memcmp(name + len - n, PyBytes_AS_STRING(sfx), n) == 0 && n > best)
			best = n;
	}
	return best ? len - 2 - best : 0;
}

/* Whether NAME starts no code of its own: asm.unsized._NOT_LABEL (mapping symbols, .L labels). */
static int not_label(const char *name, Py_ssize_t len)
{
	if (len >= 2 && name[0] == '.' && name[1] == 'L')
		return 1;
	if (len < 2 || name[0] != '$' || !name[1] || !strchr("adtx", name[1]))
		return 0;
	return len == 2 || name[2] == '.' || (len == 3 && name[2] == '\n') ||
	       (len >= 4 && name[2] == 'r' && name[3] == 'v');
}

/* The name of listed symbol K and, when it is a stub symbol's, the length of its target's in *TARGET. */
static const char *mark_name(const struct elf *e, const struct holes *h, Py_ssize_t k, Py_ssize_t *len,
			     Py_ssize_t *target)
{
	const char *name = string_at(e->str, e->strsize, h->l->name[k], len);

	*target = *len ? stub_target(h, name, *len) : 0;
	return name;
}

/*
 * The listing's symbols of the scanned sections into H's spans (the sized ones) and bounds
 * (stub symbols, sized or not, and the unsized that are labels), as asm.unsized.code_map sorts
 * its rows; each sorted by section, address and symbol order. Needs no GIL: 0, or -1 when out
 * of memory.
 */
static int sort_marks(const struct elf *e, struct holes *h)
{
	const struct listing *l = h->l;
	Py_ssize_t k, slot, len, target;
	struct mark *tmp;

	h->spans = PyMem_RawMalloc(sizeof(*h->spans) * (l->n + 1));
	h->bounds = PyMem_RawMalloc(sizeof(*h->bounds) * (l->n + 1));
	tmp = PyMem_RawMalloc(sizeof(*tmp) * (l->n + 1));
	if (!h->spans || !h->bounds || !tmp) {
		PyMem_RawFree(tmp);
		return -1;
	}
	for (k = 0; k < l->n; k++) {
		const char *name;
		struct mark *m;

		if (l->sec[k] < 0 || l->sec[k] >= e->shnum || (slot = h->slot[l->sec[k]]) < 0)
			continue;
		name = mark_name(e, h, k, &len, &target);
		if (!len || (!target && !l->size[k] && not_label(name, len)))
			continue;
		m = target || !l->size[k] ? &h->bounds[h->nbounds++] : &h->spans[h->nspans++];
		m->start = l->value[k];
		m->size = l->size[k];
		m->k = k;
		m->slot = (uint32_t)slot;
		m->stub = target > 0;
	}
	sort_by_address(h->spans, tmp, h->nspans);
	sort_by_address(h->bounds, tmp, h->nbounds);
	PyMem_RawFree(tmp);
	return 0;
}

/* The holes of section S, [base, base + size) less its N SPANS (asm.unsized._uncovered), into G: N + 1 at most. */
static Py_ssize_t uncovered(const struct scan *s, const struct mark *spans, Py_ssize_t n, struct gap *g)
{
	uint64_t reach = s->base, hi = s->base + s->size;
	Py_ssize_t i, h = 0;

	for (i = 0; i < n && reach < hi; i++) {
		if (spans[i].start > reach) {
			g[h].start = reach;
			g[h++].end = spans[i].start < hi ? spans[i].start : hi;
		}
		if (mark_end(&spans[i]) > reach)
			reach = mark_end(&spans[i]);
	}
	if (reach < hi) {
		g[h].start = reach;
		g[h++].end = hi;
	}
	for (i = 0; i < h; i++) {
		g[i].marked = 0;
		g[i].left = 1;
	}
	return h;
}

/* The bytes of [from, to) in a section's DATA (LEN bytes, from address BASE) as a Python slice cuts them; N: how many. */
static const uint8_t *bytes_of(const uint8_t *data, Py_ssize_t len, uint64_t base, uint64_t from, uint64_t to,
			       Py_ssize_t *n)
{
	uint64_t a = from - base, b = to - base;

	a = a < (uint64_t)len ? a : (uint64_t)len;
	b = b < (uint64_t)len ? b : (uint64_t)len;
	*n = b > a ? (Py_ssize_t)(b - a) : 0;
	return data + a;
}

static void count_hole(struct holes *h, const struct gap *g)
{
	if (g->end - g->start >= h->pad.run)
		h->fill += g->end - g->start;
	else
		h->padding += g->end - g->start;
}

/* Every scanned section's spans, bounds and holes (H->of, H->gaps). Needs no GIL: 0, or -1 when out of memory. */
static int find_holes(struct holes *h)
{
	Py_ssize_t s, i = 0, j = 0, at = 0;

	h->of = PyMem_RawCalloc(h->nscan + 1, sizeof(*h->of));
	h->gaps = PyMem_RawMalloc(sizeof(*h->gaps) * (h->nspans + h->nscan + 1));
	if (!h->of || !h->gaps)
		return -1;
	for (s = 0; s < h->nscan; s++) {
		struct section_holes *o = &h->of[s];

		o->span = i;
		o->bound = j;
		for (; i < h->nspans && h->spans[i].slot == s; i++)
			;
		for (; j < h->nbounds && h->bounds[j].slot == s; j++)
			;
		o->nspans = i - o->span;
		o->nbounds = j - o->bound;
		o->gap = at;
		o->ngaps = uncovered(&h->scan[s], h->spans + o->span, o->nspans, h->gaps + at);
		at += o->ngaps;
	}
	return 0;
}

/*
 * asm.unsized._count_padding over the holes of scanned section S (its bytes in H->of[S]): a
 * hole is marked when a bound lies between its start and the next hole's; the unmarked ones
 * are counted as padding when their bytes joined are padding, else one by one, and the rest are
 * left. Needs no GIL: 0, or -1 when out of memory.
 */
static int count_padding(struct holes *h, Py_ssize_t s)
{
	const struct section_holes *o = &h->of[s];
	const struct scan *sc = &h->scan[s];
	const struct mark *b = h->bounds + o->bound;
	const uint8_t *data = o->bytes.buf, *p;
	struct gap *g = h->gaps + o->gap;
	Py_ssize_t i, j = 0, n = o->ngaps, nb = o->nbounds, len = o->bytes.len, size, total = 0;
	uint8_t *blob;
	int all;

	for (i = 0; i < nb; i++) {	/* bisect_right(starts, bound) - 1, the bounds in order */
		while (j < n && g[j].start <= b[i].start)
			j++;
		if (j > 0)
			g[j - 1].marked = 1;
	}
	for (i = 0; i < n; i++)
		if (!g[i].marked) {
			bytes_of(data, len, sc->base, g[i].start, g[i].end, &size);
			total += size;
		}
	blob = PyMem_RawMalloc(total + 1);
	if (!blob)
		return -1;
	for (i = 0, total = 0; i < n; i++)
		if (!g[i].marked) {
			p = bytes_of(data, len, sc->base, g[i].start, g[i].end, &size);
			memcpy(blob + total, p, size);
			total += size;
		}
	all = is_padding(&h->pad, blob, total);
	PyMem_RawFree(blob);
	for (i = 0; i < n; i++) {
		p = bytes_of(data, len, sc->base, g[i].start, g[i].end, &size);
		if (!g[i].marked && (all || is_padding(&h->pad, p, size))) {
			count_hole(h, &g[i]);
			g[i].left = 0;
		}
	}
	return 0;
}

/* The first of the N bounds B at or after ADDRESS. */
static Py_ssize_t first_bound(const struct mark *b, Py_ssize_t n, uint64_t address)
{
	Py_ssize_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (b[mid].start < address)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* TUPLE[I] = V; 0, or -1 with an exception set. */
static int set_int(PyObject *tuple, Py_ssize_t i, uint64_t v)
{
	PyObject *x = PyLong_FromUnsignedLongLong(v);

	if (!x)
		return -1;
	PyTuple_SET_ITEM(tuple, i, x);
	return 0;
}

/* STUBS[address of stub symbol M] = (size, target); 0, or -1 with an exception set. */
static int add_stub(const struct elf *e, const struct holes *h, PyObject *stubs, const struct mark *m)
{
	PyObject *key = PyLong_FromUnsignedLongLong(m->start), *name = NULL, *value = NULL;
	Py_ssize_t len, target;
	const char *s = mark_name(e, h, m->k, &len, &target);
	int rc = -1;

	if (key)
		name = PyUnicode_DecodeUTF8(s + 2, target, "surrogateescape");
	if (name)
		value = Py_BuildValue("(KO)", (unsigned long long)m->size, name);
	if (value)
		rc = PyDict_SetItem(stubs, key, value);
	Py_XDECREF(key);
	Py_XDECREF(name);
	Py_XDECREF(value);
	return rc;
}

/*
 * (index, cuts, stubs) of hole G of section S, its bounds from B on (N of them, NINNER distinct
 * addresses inside it): CUTS, its start, those addresses and its end; STUBS, {address: (size,
 * target)} of the stub symbols at its start and those addresses (the last in symbol order at
 * each). A new reference, or NULL with an exception set.
 */
static PyObject *hole_tuple(const struct elf *e, const struct holes *h, const struct scan *s, const struct mark *b,
			    Py_ssize_t n, const struct gap *g, Py_ssize_t ninner)
{
	PyObject *cuts = PyTuple_New(ninner + 2), *stubs = PyDict_New(), *out = NULL;
	Py_ssize_t i, c = 1;

	if (!cuts || !stubs || set_int(cuts, 0, g->start) < 0 || set_int(cuts, ninner + 1, g->end) < 0)
		goto done;
	for (i = 0; i < n && b[i].start < g->end; i++) {
		if (b[i].start > g->start && (i == 0 || b[i].start != b[i - 1].start) &&
		    set_int(cuts, c++, b[i].start) < 0)
			goto done;
		if (b[i].stub && add_stub(e, h, stubs, &b[i]) < 0)
			goto done;
	}
	out = Py_BuildValue("(nOO)", s->index, cuts, stubs);
done:
	Py_XDECREF(cuts);
	Py_XDECREF(stubs);
	return out;
}

/*
 * Hole G of section S that was left, with the NB bounds B of the section: counted when COUNT
 * and no bound cuts it and its bytes are padding, else (index, cuts, stubs) appended to LIST.
 * 0, or -1 with an exception set.
 */
static int left_hole(const struct elf *e, struct holes *h, Py_ssize_t s, const struct gap *g, int count,
		     PyObject *list)
{
	const struct section_holes *o = &h->of[s];
	const struct scan *sc = &h->scan[s];
	const struct mark *b = h->bounds + o->bound;
	Py_ssize_t nb = o->nbounds, first = first_bound(b, nb, g->start), i, ninner = 0, size;
	const uint8_t *p;
	PyObject *t;
	int rc;

	for (i = first; i < nb && b[i].start < g->end; i++)
		if (b[i].start > g->start && (i == first || b[i].start != b[i - 1].start))
			ninner++;
	if (count && !ninner) {
		p = bytes_of(o->bytes.buf, o->bytes.len, sc->base, g->start, g->end, &size);
		if (is_padding(&h->pad, p, size)) {
			count_hole(h, g);
			return 0;
		}
	}
	t = hole_tuple(e, h, sc, b + first, nb - first, g, ninner);
	if (!t)
		return -1;
	rc = PyList_Append(list, t);
	Py_DECREF(t);
	return rc;
}

/* With COUNT, the bytes of every scanned section with holes, asked of READ(index) once. 0, or -1 with an exception set. */
static int read_sections(struct holes *h, PyObject *read)
{
	Py_ssize_t s;

	for (s = 0; s < h->nscan; s++) {
		PyObject *data;
		int rc;

		if (!h->of[s].ngaps)
			continue;
		data = PyObject_CallFunction(read, "n", h->scan[s].index);
		if (!data)
			return -1;
		rc = PyObject_GetBuffer(data, &h->of[s].bytes, PyBUF_SIMPLE);
		Py_DECREF(data);
		if (rc < 0) {
			PyErr_SetString(PyExc_TypeError, "read(index): a section's bytes (bytes or a memoryview)");
			return -1;
		}
	}
	return 0;
}

/* The holes left in every scanned section, in section order: (padding, fill, holes), or NULL with an exception set. */
static PyObject *left_holes(const struct elf *e, struct holes *h, int count)
{
	PyObject *list = PyList_New(0), *out = NULL;
	Py_ssize_t s, i;

	if (!list)
		return NULL;
	for (s = 0; s < h->nscan; s++)
		for (i = 0; i < h->of[s].ngaps; i++) {
			struct gap *g = &h->gaps[h->of[s].gap + i];

			if (g->left && left_hole(e, h, s, g, count, list) < 0)
				goto done;
		}
	out = Py_BuildValue("(KKO)", h->padding, h->fill, list);
done:
	Py_DECREF(list);
	return out;
}

const char code_holes_doc[] =
"code_holes(view, rules, sections, padding, suffixes, read, count) -> (padding, fill, holes)\n\n"
"The code no sized symbol covers in SECTIONS ((index, base, size) each: an executable section,\n"
"where its bytes start, 0 in an object) of one member (VIEW, RULES: as symbols() takes them),\n"
"from the symbols nm lists with a name, as asm.unsized.code_map takes them: sized ones cover,\n"
"stub symbols (\"__\" target and one of SUFFIXES, bytes) and labels (unsized, not mapping\n"
"symbols or .L) cut the holes. With COUNT, the holes that are padding (PADDING: asm.unsized's\n"
"_padding_spec) are counted, padding runs of RUN bytes or more apart as fill, reading a section's\n"
"bytes (any buffer) with READ(index) once; HOLES, the rest in section order: (index, cuts, stubs), CUTS the\n"
"hole's start, the bounds inside it and its end, STUBS {address: (size, target)}. The GIL is\n"
"released while symbols are listed and sorted and bytes scanned: two members at once on two threads.";

PyObject *code_holes(PyObject *self, PyObject *args)
{
	PyObject *view, *rules_tuple, *sections, *spec, *suffixes, *read, *out = NULL;
	struct listing l = { 0 };
	struct holes h = { 0 };
	struct rules r;
	struct elf e;
	Py_ssize_t s;
	int count, ok;

	if (!PyArg_ParseTuple(args, "OOO!OO!Op", &view, &rules_tuple, &PyTuple_Type, &sections, &spec, &PyTuple_Type,
			      &suffixes, &read, &count))
		return NULL;
	if (elf_and_rules_from(view, rules_tuple, &e, &r) < 0)
		return NULL;
	h.l = &l;
	if (holes_from(&h, &e, sections, spec, suffixes) < 0)
		goto done;
	Py_BEGIN_ALLOW_THREADS
	e.nogil = 1;
	ok = listing_alloc(&l, &e, 1, 0) == 0 && list_symbols(&e, &r, &l, 0, 1) == 0;
	ok = ok && sort_marks(&e, &h) == 0 && find_holes(&h) == 0;
	e.nogil = 0;
	Py_END_ALLOW_THREADS
	if (!ok) {	/* list again with the GIL: the same error, now as an exception */
		listing_free(&l);
		if (listing_alloc(&l, &e, 1, 0) == 0 && list_symbols(&e, &r, &l, 0, 1) == 0)
			PyErr_NoMemory();
		goto done;
	}
	if (count) {
		if (read_sections(&h, read) < 0)
			goto done;
		Py_BEGIN_ALLOW_THREADS
		for (s = 0; ok && s < h.nscan; s++)
			ok = !h.of[s].ngaps || count_padding(&h, s) == 0;
		Py_END_ALLOW_THREADS
		if (!ok) {
			PyErr_NoMemory();
			goto done;
		}
	}
	out = left_holes(&e, &h, count);
done:
	holes_free(&h);
	listing_free(&l);
	rules_release(&r);
	elf_release(&e);
	return out;
}

const char padding_prefix_doc[] =
"padding_prefix(padding, raw) -> int\n\n"
"How many bytes RAW starts with that are padding (PADDING: asm.unsized's _padding_spec): x86's\n"
"fill bytes and NOPs, or whole tokens; _padding_regex(target).match(raw).end(), without importing re.";

PyObject *padding_prefix(PyObject *self, PyObject *args)
{
	PyObject *spec;
	struct padding pad;
	Py_buffer raw;
	Py_ssize_t n;

	if (!PyArg_ParseTuple(args, "Oy*", &spec, &raw))
		return NULL;
	n = padding_from(spec, &pad) < 0 ? -1 : padding_head(&pad, raw.buf, raw.len);
	padding_release(&pad);
	PyBuffer_Release(&raw);
	return n < 0 ? NULL : PyLong_FromSsize_t(n);
}
