/*
 * _holes.c: code no sized symbol covers, for asm.unsized, which says what its kinds are
 * (padding, linker stubs, other code) and spells padding per target. Why C: speed. `flagbench
 * size` sorts the holes between a vmlinux's sized code symbols (20,000 of them) into those
 * kinds, and in Python the walk over its symbols, holes and their bytes took about 75 ms a side,
 * more than the rest of its default format. This finds the holes, counts those that are all
 * padding, and hands the rest back cut at their labels and stub symbols, to be sorted into
 * pieces in Python (code_holes); a linked x86-64 member's it sorts and sums itself, for the
 * reader of `flagbench size` (x86_unsized, for _scan.c).
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
	if (n - q < 3 || p[q] != 0x0f || p[q + 1] != 0x1f)
		return 0;
	switch (p[q + 2]) {	/* nopl/nopw, all zero after the modrm: 00, 40 disp8, 44 sib disp8, 80 disp32, 84 sib disp32 */
	case 0x00: m = 1; break;
	case 0x40: m = 2; break;
	case 0x44: m = 3; break;
	case 0x80: m = 5; break;
	case 0x84: m = 6; break;
	default: return 0;
	}
	if (n - q - 2 < m)
		return 0;
	for (i = 1; i < m; i++)
		if (p[q + 2 + i])
			return 0;
	return q + 2 + m;
}

/* Whether the M bytes at A and B are the same: two overlapping loads where M is 4 to 16 (a NOP's length), else memcmp. */
static int same_bytes(const uint8_t *a, const uint8_t *b, Py_ssize_t m)
{
	uint64_t w[4];
	uint32_t v[4];

	if (m >= 8 && m <= 16) {
		memcpy(&w[0], a, 8), memcpy(&w[1], b, 8), memcpy(&w[2], a + m - 8, 8), memcpy(&w[3], b + m - 8, 8);
		return w[0] == w[1] && w[2] == w[3];
	}
	if (m >= 4 && m < 8) {
		memcpy(&v[0], a, 4), memcpy(&v[1], b, 4), memcpy(&v[2], a + m - 4, 4), memcpy(&v[3], b + m - 4, 4);
		return v[0] == v[1] && v[2] == v[3];
	}
	return memcmp(a, b, m) == 0;
}

/*
 * How many of the N bytes at P are FILL bytes before the first that is not: eight at a time where
 * one repeats, and a long run (megabytes of int3 end a vmlinux's .text) 256 at a time against the
 * 256 just seen, in libc's vector compare.
 */
static Py_ssize_t fill_bytes(const struct padding *r, const uint8_t *p, Py_ssize_t n)
{
	Py_ssize_t i = 0, from;
	uint64_t same, w;

	while (i < n && r->fill[p[i]]) {
		from = i;
		same = 0x0101010101010101ULL * p[i++];
		while (i + 8 <= n && (memcpy(&w, p + i, 8), w == same)) {
			i += 8;
			while (i - from >= 256 && i + 256 <= n && memcmp(p + i, p + i - 256, 256) == 0)
				i += 256;
		}
	}
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
			/* the same NOP again (a vmlinux pads with runs of one 11-byte NOP): no spelling is the start of another */
			for (i += m; i + m <= n && same_bytes(p + i, p + i - m, m); i += m)
				;
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
	const uint8_t *bytes;	/* x86_unsized: its bytes (code_holes asks READ for them) */
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
	const uint8_t *bytes;		/* with COUNT, the section's bytes, when it has holes */
	Py_ssize_t nbytes;
	Py_buffer view;			/* code_holes: where BYTES are, from READ(index) */
};

#define SHORT_HOLE 64		/* a hole between two functions, padded by the assembler */

/* All that code_holes() and x86_unsized() work with, besides the member's tables. */
struct holes {
	const struct listing *l;
	struct padding pad;
	struct scan *scan;
	Py_ssize_t nscan, *slot;	/* SLOT: a section index's place in SCAN, or -1 */
	struct mark *spans, *bounds;
	Py_ssize_t nspans, nbounds;
	struct section_holes *of;	/* per scanned section */
	struct gap *gaps;
	struct unsized sum;		/* code_holes counts only padding and fill */
	const uint8_t *padded[SHORT_HOLE];	/* by length, the bytes of a short hole found to be padding */
};

/* The linker's stub symbols end so (asm.unsized._STUB_SUFFIXES: a test holds the two together). */
static const char *const stub_suffixes[] = { "_veneer", "_from_arm", "_from_thumb", "_change_to_arm", NULL };

/* x86's padding bytes of any length and the run that is alignment fill: asm.unsized._padding_spec("x86_64"). */
static const char x86_fill[] = "\xcc\x90\x00";
#define FILL_RUN 4096

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

/* x86's padding (granule 0: its NOPs), as padding_from makes it of asm.unsized._padding_spec("x86_64"). */
static void x86_padding(struct padding *r)
{
	size_t i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < sizeof(x86_fill) - 1; i++)
		r->fill[(uint8_t)x86_fill[i]] = 1;
	r->run = FILL_RUN;
}

/* Room in H for NSCAN sections of a member of SHNUM, none placed yet; 0, or -1 when out of memory (no GIL needed). */
static int holes_alloc(struct holes *h, Py_ssize_t nscan, Py_ssize_t shnum)
{
	Py_ssize_t i;

	h->scan = scratch_calloc(nscan + 1, sizeof(*h->scan));
	h->slot = scratch_malloc(sizeof(*h->slot) * (shnum + 1));
	if (!h->scan || !h->slot)
		return -1;
	for (i = 0; i < shnum; i++)
		h->slot[i] = -1;
	return 0;
}

/* H's sections and rules from the arguments; 0, or -1 with an exception set (holes_free undoes it). */
static int holes_from(struct holes *h, const struct elf *e, PyObject *sections, PyObject *spec)
{
	Py_ssize_t i;

	if (padding_from(spec, &h->pad) < 0)
		return -1;
	h->nscan = PyTuple_GET_SIZE(sections);
	if (holes_alloc(h, h->nscan, e->shnum) < 0) {
		PyErr_NoMemory();
		return -1;
	}
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
		if (h->of[i].view.obj)
			PyBuffer_Release(&h->of[i].view);
	scratch_free(h->scan);
	scratch_free(h->slot);
	scratch_free(h->spans);
	scratch_free(h->bounds);
	scratch_free(h->of);
	scratch_free(h->gaps);
}

/*
 * The length of the target's name when NAME (LEN bytes) is a stub symbol's, else 0: "__" TARGET
 * SUFFIX, TARGET not empty and no newline anywhere, as asm.unsized.STUB_SYMBOL matches it (the
 * shortest TARGET: the longest suffix).
 */
static Py_ssize_t stub_target(const char *name, Py_ssize_t len)
{
	const char *const *sfx;
	Py_ssize_t n, best = 0;

	if (len < 3 || name[0] != '_' || name[1] != '_')
		return 0;
	for (sfx = stub_suffixes; *sfx; sfx++) {
		n = (Py_ssize_t)strlen(*sfx);
		if (len - 2 - n >= 1 && memcmp(name + len - n, *sfx, n) == 0 && n > best)
			best = n;
	}
	return best && !memchr(name, '\n', len) ? len - 2 - best : 0;
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

	*target = *len ? stub_target(name, *len) : 0;
	return name;
}

/* Room in H for the marks of L's symbols, none placed yet; 0, or -1 when out of memory. */
static int marks_alloc(struct holes *h, const struct listing *l)
{
	if (!h->spans)
		h->spans = scratch_malloc(sizeof(*h->spans) * (l->n + 1));
	if (!h->bounds)	/* room for every symbol, seldom more than a page of it used: not the scratch's (huge) pages */
		h->bounds = PyMem_RawMalloc(sizeof(*h->bounds) * (l->n + 1));
	h->nspans = h->nbounds = 0;
	return h->spans && h->bounds ? 0 : -1;
}

/*
 * Listed symbol K, of scanned section SLOT, into H's spans (a sized one) or bounds (a stub
 * symbol, sized or not, or an unsized label), as asm.unsized.code_map sorts its rows; or left
 * out (no name, or unsized and starting no code of its own).
 */
static void add_mark(const struct elf *e, struct holes *h, Py_ssize_t k, Py_ssize_t slot)
{
	const struct listing *l = h->l;
	const char *name = (const char *)e->str + l->name[k];
	Py_ssize_t room = e->strsize - l->name[k], len, target = 0;
	struct mark *m;

	/* mark_name's, measuring the name only as far as not_label looks, but where a stub's may start */
	len = (Py_ssize_t)strnlen(name, room < 4 ? room : 4);
	if (len >= 3 && name[0] == '_' && name[1] == '_')
		target = stub_target(name, (Py_ssize_t)strnlen(name, room));

	if (!len || (!target && !l->size[k] && not_label(name, len)))
		return;
	m = target || !l->size[k] ? &h->bounds[h->nbounds++] : &h->spans[h->nspans++];
	m->start = l->value[k];
	m->size = l->size[k];
	m->k = k;
	m->slot = (uint32_t)slot;
	m->stub = target > 0;
}

/*
 * The listing's symbols of the scanned sections into H's marks, each kind sorted by section,
 * address and symbol order. Needs no GIL: 0, or -1 when out of memory.
 */
static int sort_marks(const struct elf *e, struct holes *h)
{
	const struct listing *l = h->l;
	Py_ssize_t k, slot;
	struct mark *tmp;

	if (marks_alloc(h, l) < 0 || !(tmp = scratch_malloc(sizeof(*tmp) * (l->n + 1))))
		return -1;
	for (k = 0; k < l->n; k++)
		if (l->sec[k] >= 0 && l->sec[k] < e->shnum && (slot = h->slot[l->sec[k]]) >= 0)
			add_mark(e, h, k, slot);
	sort_by_address(h->spans, tmp, h->nspans, 0);
	sort_by_address(h->bounds, tmp, h->nbounds, 0);
	scratch_free(tmp);
	return 0;
}

/*
 * sort_marks without a sort, from the listing's code spans that gaps() sorted (by section, start
 * and symbol order), when every scanned section's symbols lie inside it: a span's start is then
 * its address less the section's, and the marks come out in sort_marks' order. Needs no GIL: 0,
 * 1 when a symbol lies outside its section (sort_marks then), or -1 when out of memory.
 */
static int marks_in_span_order(const struct elf *e, struct holes *h)
{
	const struct listing *l = h->l;
	Py_ssize_t i, slot;

	if (marks_alloc(h, l) < 0)
		return -1;
	for (i = 0; i < l->nspans; i++) {
		const struct span *sp = &l->spans[i];
		const struct scan *sc;

		if ((slot = h->slot[sp->sec]) < 0)
			continue;
		sc = &h->scan[slot];
		if (l->value[sp->k] < sc->base || l->value[sp->k] - sc->base != sp->start)
			return 1;
		add_mark(e, h, sp->k, slot);
	}
	return 0;
}

/* H's marks, in span order where the listing has its spans sorted, else sorted here. 0, or -1 when out of memory. */
static int listing_marks(const struct elf *e, struct holes *h)
{
	int rc = h->l->spans ? marks_in_span_order(e, h) : 1;

	return rc == 1 ? sort_marks(e, h) : rc;
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

/* A run of N bytes of padding: alignment fill when it is that long (asm.unsized.FILL). */
static void count_run(struct holes *h, uint64_t n)
{
	if (n >= h->pad.run)
		h->sum.fill += n;
	else
		h->sum.padding += n;
}

/* Every scanned section's spans, bounds and holes (H->of, H->gaps). Needs no GIL: 0, or -1 when out of memory. */
static int find_holes(struct holes *h)
{
	Py_ssize_t s, i = 0, j = 0, at = 0;

	h->of = scratch_calloc(h->nscan + 1, sizeof(*h->of));
	h->gaps = scratch_malloc(sizeof(*h->gaps) * (h->nspans + h->nscan + 1));
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
 * Whether the N bytes at P are padding (is_padding), for a hole: holes of one length between
 * functions are mostly padded alike (the assembler's NOPs for that many bytes), so a short one the
 * same as the last of its length found to be padding is, without its walk (a vmlinux has 19,000).
 */
static int hole_is_padding(struct holes *h, const uint8_t *p, Py_ssize_t n)
{
	const uint8_t **seen = n < SHORT_HOLE ? &h->padded[n] : NULL;

	if (seen && *seen && memcmp(*seen, p, n) == 0)
		return 1;
	if (!is_padding(&h->pad, p, n))
		return 0;
	if (seen)
		*seen = p;
	return 1;
}

/*
 * Whether x86's padding walk, stopped at P (N bytes left) where no spelling starts, would stop
 * there whatever bytes followed: it has seen every byte a spelling can need (eight past the
 * 66/2e prefixes at most).
 */
static int x86_stop_is_final(const uint8_t *p, Py_ssize_t n)
{
	Py_ssize_t q = 0;

	while (q < n && (p[q] == 0x66 || p[q] == 0x2e))
		q++;
	return n - q >= 8;
}

/*
 * Whether the unmarked holes of section S are padding joined (asm.unsized._count_padding tests
 * them so before one by one: a hole may be padding only with the next one's bytes); asked when
 * FIRST, the first unmarked hole that is not padding on its own, is one. On x86 the walk crosses
 * the ends of the holes before it in step (no spelling is the start of another), so where its own
 * walk stopped for good the join stops too, without being made. 1, 0, or -1 when out of memory.
 */
static int joined_is_padding(struct holes *h, Py_ssize_t s, const struct gap *first)
{
	const struct section_holes *o = &h->of[s];
	const struct gap *g = h->gaps + o->gap;
	Py_ssize_t i, size, total = 0, head;
	const uint8_t *p = bytes_of(o->bytes, o->nbytes, h->scan[s].base, first->start, first->end, &size);
	uint8_t *blob;
	int all;

	if (!h->pad.granule) {
		head = padding_head(&h->pad, p, size);
		if (x86_stop_is_final(p + head, size - head))
			return 0;
	}
	for (i = 0; i < o->ngaps; i++)
		if (!g[i].marked) {
			bytes_of(o->bytes, o->nbytes, h->scan[s].base, g[i].start, g[i].end, &size);
			total += size;
		}
	if (!(blob = scratch_malloc(total + 1)))
		return -1;
	for (i = 0, total = 0; i < o->ngaps; i++)
		if (!g[i].marked) {
			p = bytes_of(o->bytes, o->nbytes, h->scan[s].base, g[i].start, g[i].end, &size);
			memcpy(blob + total, p, size);
			total += size;
		}
	all = is_padding(&h->pad, blob, total);
	scratch_free(blob);
	return all;
}

/*
 * asm.unsized._count_padding over the holes of scanned section S (its bytes in H->of[S]): a
 * hole is marked when a bound lies between its start and the next hole's; the unmarked ones
 * are counted as padding when their bytes joined are padding, else one by one, and the rest are
 * left. One by one first here: the join decides only when one is not padding on its own. Needs
 * no GIL: 0, or -1 when out of memory.
 */
static int count_padding(struct holes *h, Py_ssize_t s)
{
	const struct section_holes *o = &h->of[s];
	const struct mark *b = h->bounds + o->bound;
	struct gap *g = h->gaps + o->gap, *first = NULL;
	Py_ssize_t i, j = 0, n = o->ngaps, nb = o->nbounds, size;
	const uint8_t *p;
	int all = 0;

	for (i = 0; i < nb; i++) {	/* bisect_right(starts, bound) - 1, the bounds in order */
		while (j < n && g[j].start <= b[i].start)
			j++;
		if (j > 0)
			g[j - 1].marked = 1;
	}
	for (i = 0; i < n; i++)
		if (!g[i].marked) {
			p = bytes_of(o->bytes, o->nbytes, h->scan[s].base, g[i].start, g[i].end, &size);
			g[i].left = !hole_is_padding(h, p, size);
			if (g[i].left && !first)
				first = &g[i];
		}
	if (first && (all = joined_is_padding(h, s, first)) < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (!g[i].marked && (all || !g[i].left)) {
			count_run(h, g[i].end - g[i].start);
			g[i].left = 0;
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
 * Hole G of section S, left by count_padding: counted after all, when COUNT and no bound cuts
 * it and its bytes are padding (asm.unsized.code_map's test of a hole of two cuts); 1 then,
 * else 0. In *FIRST the first of the section's bounds at or after its start, in *NINNER how
 * many distinct addresses inside it they cut it at.
 */
static int counted_after_all(struct holes *h, Py_ssize_t s, const struct gap *g, int count, Py_ssize_t *first,
			     Py_ssize_t *ninner)
{
	const struct section_holes *o = &h->of[s];
	const struct mark *b = h->bounds + o->bound;
	Py_ssize_t nb = o->nbounds, i, size;
	const uint8_t *p;

	*first = first_bound(b, nb, g->start);
	*ninner = 0;
	for (i = *first; i < nb && b[i].start < g->end; i++)
		if (b[i].start > g->start && (i == *first || b[i].start != b[i - 1].start))
			(*ninner)++;
	if (!count || *ninner)
		return 0;
	p = bytes_of(o->bytes, o->nbytes, h->scan[s].base, g->start, g->end, &size);
	if (!is_padding(&h->pad, p, size))
		return 0;
	count_run(h, g->end - g->start);
	return 1;
}

/*
 * Hole G of section S, left by count_padding: counted after all, else (index, cuts, stubs)
 * appended to LIST. 0, or -1 with an exception set.
 */
static int left_hole(const struct elf *e, struct holes *h, Py_ssize_t s, const struct gap *g, int count,
		     PyObject *list)
{
	const struct mark *b = h->bounds + h->of[s].bound;
	Py_ssize_t first, ninner;
	PyObject *t;
	int rc;

	if (counted_after_all(h, s, g, count, &first, &ninner))
		return 0;
	t = hole_tuple(e, h, &h->scan[s], b + first, h->of[s].nbounds - first, g, ninner);
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
		rc = PyObject_GetBuffer(data, &h->of[s].view, PyBUF_SIMPLE);
		Py_DECREF(data);
		if (rc < 0) {
			PyErr_SetString(PyExc_TypeError, "read(index): a section's bytes (bytes or a memoryview)");
			return -1;
		}
		h->of[s].bytes = h->of[s].view.buf;
		h->of[s].nbytes = h->of[s].view.len;
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
	out = Py_BuildValue("(KKO)", h->sum.padding, h->sum.fill, list);
done:
	Py_DECREF(list);
	return out;
}

/*
 * x86-64's linked members, as `flagbench size` reads them (_scan.c: no GIL, no Python): their
 * code outside sized symbols summed by kind here, as asm.unsized.of_member(...).totals() sums
 * it, so that its default format neither opens the file again nor cuts pieces in Python. The
 * walk is code_holes', the pieces asm.unsized._pieces' and _scan's for x86; tests hold the sums
 * to the Python model (_of_member_in_python) on real files.
 */

/* NAME (LEN bytes) is one of the NULL-ended NAMES. */
static int name_is(const char *name, Py_ssize_t len, const char *const *names)
{
	for (; *names; names++)
		if ((Py_ssize_t)strlen(*names) == len && memcmp(name, *names, len) == 0)
			return 1;
	return 0;
}

/* asm.unsized's _PLT_NAMES and _PLT_RELOCS; a PLT section's name may end in a newline (its _is_plt). */
static const char *const plt_names[] = { ".plt", ".plt.sec", ".plt.got", ".plt.bnd", ".iplt", NULL };
static const char *const plt_relocs[] = { ".rela.plt", ".rel.plt", ".rela.iplt", ".rel.iplt", NULL };

static int is_plt(const char *name, Py_ssize_t len)
{
	return name_is(name, len && name[len - 1] == '\n' ? len - 1 : len, plt_names);
}

/*
 * The executable sections of linked member E (its BYTES, SIZE of them) into H, as
 * asm.unsized._exec_sections finds them: PLT sections summed as stubs (all the PLT relocations'
 * entries counted with the first), the rest to scan. 0, or -1 for Python to do it (a section
 * name or bytes past their tables, an end past 2^64, out of memory).
 */
static int linked_sections(struct holes *h, const struct elf *e, const uint8_t *bytes, uint64_t size)
{
	unsigned long long plt_entries = 0;
	Py_ssize_t i, len;
	int plt = 0;

	if (holes_alloc(h, e->shnum, e->shnum) < 0)
		return -1;
	for (i = 0; i < e->shnum; i++) {
		uint64_t flags = sh(e, i, SH_FLAGS), addr = sh(e, i, SH_ADDR), n = sh(e, i, SH_SIZE);
		uint64_t name = sh(e, i, SH_NAME), off = sh(e, i, SH_OFFSET), entsize = sh(e, i, SH_ENTSIZE);
		const char *s = "";
		struct scan *sc;

		len = 0;
		if (name < (uint64_t)e->shstrsize)
			s = string_at(e->shstr, e->shstrsize, name, &len);
		else if (i > 0)		/* elf.sections.names refuses it */
			return -1;
		if (entsize && name_is(s, len, plt_relocs))
			plt_entries += n / entsize;
		if ((flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR) ||
		    sh(e, i, SH_TYPE) == SHT_NOBITS || !n)
			continue;
		if (is_plt(s, len)) {
			h->sum.stub += n;
			plt = 1;
			continue;
		}
		if (i == 0 || addr + n < addr || off > size || n > size - off)
			return -1;
		sc = &h->scan[h->nscan];
		sc->index = i;
		sc->base = addr;
		sc->size = n;
		sc->bytes = bytes + off;
		h->slot[i] = h->nscan++;
	}
	if (plt)
		h->sum.stubs += plt_entries;
	return 0;
}

/*
 * asm.unsized._scan of x86, summed: [A, B) of section S with no stub in it, padding in one piece
 * when its bytes are all padding, else a padding run at each end (x86's fill bytes at the end:
 * raw.rstrip(b"\xcc\x90\x00")) and other code between.
 */
static void sum_x86_piece(struct holes *h, Py_ssize_t s, uint64_t a, uint64_t b)
{
	Py_ssize_t n, head, tail;
	const uint8_t *p = bytes_of(h->of[s].bytes, h->of[s].nbytes, h->scan[s].base, a, b, &n);

	head = padding_head(&h->pad, p, n);	/* x86's fill bytes are one-byte NOPs: all fill is all padding */
	if (head == n) {
		count_run(h, b - a);
		return;
	}
	for (tail = n; tail > head && h->pad.fill[p[tail - 1]]; tail--)
		;
	if (head)
		count_run(h, head);
	h->sum.other += tail - head;
	if (tail < n)
		count_run(h, b - a - tail);
}

/*
 * asm.unsized._pieces of hole G of section S, summed: cut at its bounds from FIRST on; at each
 * cut a stub symbol (the last in symbol order there) makes a stub of its size (to the next cut
 * when unsized or longer), and what follows it is scanned.
 */
static void sum_left_hole(struct holes *h, Py_ssize_t s, const struct gap *g, Py_ssize_t first)
{
	const struct mark *b = h->bounds + h->of[s].bound, *stub;
	Py_ssize_t i = first, nb = h->of[s].nbounds;
	uint64_t a = g->start, from, next;

	while (a < g->end) {
		for (stub = NULL; i < nb && b[i].start == a; i++)
			if (b[i].stub)
				stub = &b[i];
		next = i < nb && b[i].start < g->end ? b[i].start : g->end;
		from = a;
		if (stub) {
			from = stub->size && stub->size < next - a ? a + stub->size : next;
			h->sum.stub += from - a;
			h->sum.stubs++;
		}
		if (from < next)
			sum_x86_piece(h, s, from, next);
		a = next;
	}
}

/*
 * Linked x86-64 member E's code outside sized symbols (L: its listing, with values and sections;
 * BYTES: the member's, SIZE of them) summed into U. Needs no GIL: 0, or -1 for Python to do it.
 */

int x86_unsized(const struct elf *e, const struct listing *l, const uint8_t *bytes, uint64_t size, struct unsized *u)
{
	struct holes h = { 0 };
	Py_ssize_t s, i, first, ninner;
	int ok;

	h.l = l;
	x86_padding(&h.pad);
	ok = linked_sections(&h, e, bytes, size) == 0 && listing_marks(e, &h) == 0 && find_holes(&h) == 0;
	for (s = 0; ok && s < h.nscan; s++) {
		h.of[s].bytes = h.scan[s].bytes;
		h.of[s].nbytes = (Py_ssize_t)h.scan[s].size;
		ok = !h.of[s].ngaps || count_padding(&h, s) == 0;
	}
	for (s = 0; ok && s < h.nscan; s++)
		for (i = 0; i < h.of[s].ngaps; i++) {
			struct gap *g = &h.gaps[h.of[s].gap + i];

			if (g->left && !counted_after_all(&h, s, g, 1, &first, &ninner))
				sum_left_hole(&h, s, g, first);
		}
	if (ok)
		*u = h.sum;
	holes_free(&h);
	return ok ? 0 : -1;
}

const char code_holes_doc[] =
"code_holes(view, rules, sections, padding, read, count) -> (padding, fill, holes)\n\n"
"The code no sized symbol covers in SECTIONS ((index, base, size) each: an executable section,\n"
"where its bytes start, 0 in an object) of one member (VIEW, RULES: as symbols() takes them),\n"
"from the symbols nm lists with a name, as asm.unsized.code_map takes them: sized ones cover,\n"
"stub symbols (\"__\" target and one of STUB_SUFFIXES) and labels (unsized, not mapping\n"
"symbols or .L) cut the holes. With COUNT, the holes that are padding (PADDING: asm.unsized's\n"
"_padding_spec) are counted, padding runs of RUN bytes or more apart as fill, reading a section's\n"
"bytes (any buffer) with READ(index) once; HOLES, the rest in section order: (index, cuts, stubs), CUTS the\n"
"hole's start, the bounds inside it and its end, STUBS {address: (size, target)}. The GIL is\n"
"released while symbols are listed and sorted and bytes scanned: two members at once on two threads.";

PyObject *code_holes(PyObject *self, PyObject *args)
{
	PyObject *view, *rules_tuple, *sections, *spec, *read, *out = NULL;
	struct listing l = { 0 };
	struct holes h = { 0 };
	struct rules r;
	struct elf e;
	Py_ssize_t s;
	int count, ok;

	if (!PyArg_ParseTuple(args, "OOO!OOp", &view, &rules_tuple, &PyTuple_Type, &sections, &spec, &read, &count))
		return NULL;
	if (elf_and_rules_from(view, rules_tuple, &e, &r) < 0)
		return NULL;
	h.l = &l;
	if (holes_from(&h, &e, sections, spec) < 0)
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

/* The NULL-ended NAMES as a tuple of bytes: a new reference, or NULL with an exception set. */
static PyObject *bytes_tuple(const char *const *names)
{
	Py_ssize_t n = 0, i;
	PyObject *t;

	while (names[n])
		n++;
	t = PyTuple_New(n);
	for (i = 0; t && i < n; i++) {
		PyObject *b = PyBytes_FromString(names[i]);

		if (!b)
			Py_CLEAR(t);
		else
			PyTuple_SET_ITEM(t, i, b);
	}
	return t;
}

/*
 * The rules above that asm.unsized spells too, as module constants for the tests that hold the
 * two together. 0, or -1 with an exception set.
 */
int add_holes_constants(PyObject *module)
{
	PyObject *c[4];
	const char *names[4] = { "STUB_SUFFIXES", "PLT_NAMES", "PLT_RELOCS", "X86_PADDING" };
	int i, rc = 0;

	c[0] = bytes_tuple(stub_suffixes);
	c[1] = bytes_tuple(plt_names);
	c[2] = bytes_tuple(plt_relocs);
	c[3] = Py_BuildValue("(y#iyi)", x86_fill, (Py_ssize_t)(sizeof(x86_fill) - 1), 0, "", FILL_RUN);
	for (i = 0; i < 4; i++) {
		if (rc == 0 && (!c[i] || PyModule_AddObjectRef(module, names[i], c[i]) < 0))
			rc = -1;
		Py_XDECREF(c[i]);
	}
	return rc;
}
