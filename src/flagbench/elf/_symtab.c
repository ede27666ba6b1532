/*
 * The per-entry loops of flagbench.elf: symbol tables and section headers, in C.
 *
 * `flagbench size` promises to be several times faster than bloat-o-meter on a vmlinux pair
 * (30k symbols; bloat-o-meter takes about half a second) and on LLVM's static archives (2,500
 * members, 600k symbols). Python spends a few hundred nanoseconds on every step of every
 * symbol, and importing numpy alone costs a fifth of bloat-o-meter's whole vmlinux run, so the
 * loops over section headers and symbol-table entries live here, for every reader of symbols
 * (elf.tables for nm's listing, elf.image for every entry): one decoding of an entry, one rule
 * for SHN_XINDEX and for ARM's Thumb bit.
 *
 * The sized symbols can go straight into bloat-o-meter's tables (_summary.c) instead of lists;
 * the code symbols give the holes between them that asm.unsized classifies (code_holes, at
 * the end), with no list either.
 *
 * What the rules are stays in Python: nm's letters come in as lookup tables built from
 * elf.symbols and elf.sections, a section whose letter depends on its name is asked of a
 * Python callback, and the section groups are passed in as data. Python opens the file, checks
 * every table's bounds and type (elf.sections), and hands over the bytes in a View (a named
 * tuple, elf.sections.View); this code still checks every offset it follows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_summary.h"
#include "_elf.h"

/*
 * NAME(a, tmp, n): a stable sort of the N records of TYPE at A (TMP: room for N more) by their
 * key bytes BYTE(record, pass), least significant first, PASSES of them: a counting pass per
 * byte, skipped where every record has the same one (a vmlinux's symbols in a qsort took
 * 600,000 calls of a comparison).
 */
#define RADIX_SORT(NAME, TYPE, BYTE, PASSES)						\
static void NAME(TYPE *a, TYPE *tmp, Py_ssize_t n)					\
{											\
	TYPE *from = a, *to = tmp, *swap;						\
	Py_ssize_t count[256], i, at, c;						\
	int pass;									\
											\
	for (pass = 0; pass < (PASSES) && n > 0; pass++) {				\
		memset(count, 0, sizeof(count));					\
		for (i = 0; i < n; i++)							\
			count[BYTE(&from[i], pass)]++;					\
		if (count[BYTE(&from[0], pass)] == n)					\
			continue;							\
		for (i = 0, at = 0; i < 256; i++, at += c) {				\
			c = count[i];							\
			count[i] = at;							\
		}									\
		for (i = 0; i < n; i++)							\
			to[count[BYTE(&from[i], pass)]++] = from[i];			\
		swap = from;								\
		from = to;								\
		to = swap;								\
	}										\
	if (from != a)									\
		memcpy(a, from, sizeof(*a) * n);					\
}


/* Fill E from VIEW; 0, or -1 with an exception set. elf_release undoes it. */
static int elf_from(PyObject *view, struct elf *e)
{
	memset(e, 0, sizeof(*e));
	if (!PyTuple_Check(view)) {
		PyErr_SetString(PyExc_TypeError, "a View (named tuple) of the member's tables");
		return -1;
	}
	if (!PyArg_ParseTuple(view, "y*y*y*y*y*ppnnnpp;View(shdrs, syms, strtab, shstr, xindex, is64, big, "
			      "symtab, strtab_index, shstrndx, relocatable, thumb)", &e->b_sh, &e->b_sym, &e->b_str,
			      &e->b_shstr, &e->b_x, &e->is64, &e->big, &e->symtab, &e->strtab, &e->shstrndx,
			      &e->relocatable, &e->thumb))
		return -1;
	e->shdrs = e->b_sh.buf;
	e->syms = e->b_sym.buf;
	e->str = e->b_str.buf;
	e->shstr = e->b_shstr.buf;
	e->xindex = e->b_x.buf;
	e->shnum = e->b_sh.len / (e->is64 ? 64 : 40);
	e->nsyms = e->b_sym.len / (e->is64 ? 24 : 16);
	e->strsize = e->b_str.len;
	e->shstrsize = e->b_shstr.len;
	e->nxindex = e->b_x.len / 4;
	return 0;
}

static void elf_release(struct elf *e)
{
	Py_buffer *b[] = { &e->b_sh, &e->b_sym, &e->b_str, &e->b_shstr, &e->b_x };
	size_t i;

	for (i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if (b[i]->obj)
			PyBuffer_Release(b[i]);
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

static uint64_t sym_size(const struct elf *e, Py_ssize_t k)
{
	return e->is64 ? rd(e->syms + 24 * k + 16, 8, e->big) : rd(e->syms + 16 * k + 8, 4, e->big);
}

/* The symbol's address, as BFD gives it: on ARM the Thumb bit of a code symbol says the mode. */
static uint64_t sym_value(const struct elf *e, Py_ssize_t k, uint8_t info)
{
	uint64_t v = e->is64 ? rd(e->syms + 24 * k + 8, 8, e->big) : rd(e->syms + 16 * k + 4, 4, e->big);

	if (e->thumb && ((info & 0xf) == STT_FUNC || (info & 0xf) == STT_GNU_IFUNC))
		v &= ~(uint64_t)1;
	return v;
}

/*
 * The section index of symbol K whose st_shndx is SHNDX: SHN_XINDEX resolved through the
 * SHT_SYMTAB_SHNDX words (0 when there is no word for it), anything else as it is.
 */
static uint32_t sym_section(const struct elf *e, Py_ssize_t k, uint32_t shndx)
{
	if (shndx != SHN_XINDEX)
		return shndx;
	return k < e->nxindex ? (uint32_t)rd(e->xindex + 4 * k, 4, e->big) : 0;
}

/* Symbol K's name, checked to start inside the string table; -1 with an exception set. */
static int64_t sym_name_checked(const struct elf *e, Py_ssize_t k)
{
	uint32_t name = sym_name(e, k);

	if (name >= (uint64_t)e->strsize) {
		if (e->nogil)	/* no exception without the GIL: the caller reads the file again in Python */
			return -1;
		PyErr_Format(PyExc_ValueError, "symbol name offset %lu past the string table, size %zd",
			     (unsigned long)name, e->strsize);
		return -1;
	}
	return name;
}

/* The NUL-terminated string at OFFSET of a table of SIZE bytes (OFFSET < SIZE), its length in *LEN. */
const char *string_at(const uint8_t *table, Py_ssize_t size, uint64_t offset, Py_ssize_t *len)
{
	const char *s = (const char *)table + offset;

	*len = (Py_ssize_t)strnlen(s, size - offset);
	return s;
}

static int rules_from(PyObject *tuple, struct rules *r)
{
	PyObject *common;
	Py_ssize_t i;

	memset(r, 0, sizeof(*r));
	if (!PyTuple_Check(tuple) ||
	    !PyArg_ParseTuple(tuple, "y*y*OO!;Rules(letters, base, name_code, common)", &r->b_letters, &r->b_base,
			      &r->name_code, &PyTuple_Type, &common)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "a Rules (named tuple)");
		return -1;
	}
	r->letters = r->b_letters.buf;
	r->base = r->b_base.buf;
	if (r->b_letters.len != 4096 || r->b_base.len != 16 || PyTuple_GET_SIZE(common) > MAX_COMMON) {
		PyErr_SetString(PyExc_ValueError, "Rules: letters is 4096 bytes, base 16, at most 8 common indices");
		goto bad;
	}
	for (i = 0; i < PyTuple_GET_SIZE(common); i++) {
		unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(common, i));

		if (v == (unsigned long)-1 && PyErr_Occurred())
			goto bad;
		r->common[r->ncommon++] = (uint32_t)v;
	}
	return 0;
bad:
	PyBuffer_Release(&r->b_letters);
	PyBuffer_Release(&r->b_base);
	return -1;
}

static void rules_release(struct rules *r)
{
	PyBuffer_Release(&r->b_letters);
	PyBuffer_Release(&r->b_base);
}

/* Fill E from VIEW and R from RULES: 0, or -1 with an exception set and neither held. */
static int elf_and_rules_from(PyObject *view, PyObject *rules, struct elf *e, struct rules *r)
{
	if (elf_from(view, e) < 0)
		return -1;
	if (rules_from(rules, r) < 0) {
		elf_release(e);
		return -1;
	}
	return 0;
}

static int is_common(const struct rules *r, uint32_t shndx)
{
	int i;

	for (i = 0; i < r->ncommon; i++)
		if (r->common[i] == shndx)
			return 1;
	return 0;
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
int section_code(const struct elf *e, const struct rules *r, uint8_t *codes, Py_ssize_t i)
{
	uint64_t flags, type, name;
	Py_ssize_t len;
	const char *s;
	PyObject *res;
	PyGILState_STATE gil;
	long code;

	if (codes[i] != UNKNOWN)
		return codes[i];
	type = sh(e, i, SH_TYPE);
	flags = sh(e, i, SH_FLAGS);
	name = sh(e, i, SH_NAME);
	if (type == SHT_SYMTAB_SHNDX || ((type == SHT_REL || type == SHT_RELA) &&
					 sh(e, i, SH_LINK) == (uint64_t)e->symtab && !(flags & SHF_ALLOC))) {
		codes[i] = 0;
		return 0;
	}
	if (name >= (uint64_t)e->shstrsize) {
		if (!e->nogil)
			PyErr_SetString(PyExc_ValueError, "section name offset past the section name table");
		return -1;
	}
	if (!(!(flags & SHF_ALLOC) && type != SHT_NOBITS && !(flags & SHF_EXECINSTR)) &&
	    !coff_name(e->shstr + name, e->shstrsize - name)) {
		codes[i] = r->base[(flags & 7) | (type == SHT_NOBITS ? 8 : 0)];
		return codes[i];
	}
	s = string_at(e->shstr, e->shstrsize, name, &len);
	gil = PyGILState_Ensure();	/* a reader without the GIL (scan.c) takes it for the callback */
	res = PyObject_CallFunction(r->name_code, "KKy#", (unsigned long long)type, (unsigned long long)flags, s, len);
	code = res ? PyLong_AsLong(res) : -1;
	Py_XDECREF(res);
	if (!PyErr_Occurred() && (code < 0 || code > 15))
		PyErr_SetString(PyExc_ValueError, "name_code out of range");
	if (PyErr_Occurred()) {
		if (e->nogil)
			PyErr_Clear();
		PyGILState_Release(gil);
		return -1;
	}
	PyGILState_Release(gil);
	codes[i] = (uint8_t)code;
	return codes[i];
}

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

/* Byte PASS of span S's sort key, least significant first: the end's bytes complemented (the longest first), the start's, the section's. */
static uint8_t span_byte(const struct span *s, int pass)
{
	if (pass < 8)
		return (uint8_t)(~s->end >> (8 * pass));
	if (pass < 16)
		return (uint8_t)(s->start >> (8 * (pass - 8)));
	return (uint8_t)(s->sec >> (8 * (pass - 16)));
}

RADIX_SORT(radix_spans, struct span, span_byte, 20)

/*
 * Sort N spans into span_order, they being in symbol order already (a qsort was a tenth of
 * `flagbench size` on a vmlinux pair). Out of memory for the second array, qsort does it.
 */
static void sort_spans(struct span *spans, Py_ssize_t n)
{
	struct span *tmp = PyMem_RawMalloc(sizeof(*spans) * (n + 1));

	if (!tmp) {
		qsort(spans, n, sizeof(*spans), span_order);
		return;
	}
	radix_spans(spans, tmp, n);
	PyMem_RawFree(tmp);
}

/* With SPANS also room for the spans of code that gaps() sorts. */
int listing_alloc(struct listing *l, const struct elf *e, int full, int spans)
{
	Py_ssize_t m = e->nsyms + 1;

	memset(l, 0, sizeof(*l));
	l->codes = PyMem_RawMalloc(e->shnum + 1);
	l->letter = PyMem_RawMalloc(m);
	l->size = PyMem_RawMalloc(sizeof(*l->size) * m);
	l->value = PyMem_RawMalloc(sizeof(*l->value) * m);
	l->gap = PyMem_RawCalloc(m, sizeof(*l->gap));
	l->sec = PyMem_RawMalloc(sizeof(*l->sec) * m);
	l->name = PyMem_RawMalloc(sizeof(*l->name) * m);
	l->spans = spans ? PyMem_RawMalloc(sizeof(*l->spans) * m) : NULL;
	if (!l->codes || !l->letter || !l->size || !l->value || !l->gap || !l->sec || !l->name || (spans && !l->spans)) {
		if (!e->nogil)
			PyErr_NoMemory();
		return -1;
	}
	memset(l->codes, UNKNOWN, e->shnum + 1);
	return 0;
}

void listing_free(struct listing *l)
{
	PyMem_RawFree(l->codes);
	PyMem_RawFree(l->letter);
	PyMem_RawFree(l->size);
	PyMem_RawFree(l->value);
	PyMem_RawFree(l->gap);
	PyMem_RawFree(l->sec);
	PyMem_RawFree(l->name);
	PyMem_RawFree(l->spans);
}

/* Where the code of listed symbol N (value V, SIZE bytes, in section SEC) lies, for gaps(). */
static void add_span(const struct elf *e, struct listing *l, uint32_t sec, uint64_t v, uint64_t size)
{
	uint64_t end_sec = sh(e, sec, SH_SIZE), addr = sh(e, sec, SH_ADDR);
	uint64_t start = e->relocatable ? v : v < addr ? 0 : v - addr;
	struct span *s = &l->spans[l->nspans++];

	if (start > end_sec)
		start = end_sec;
	s->start = start;
	s->end = size > end_sec - start ? end_sec : start + size;
	s->sec = sec;
	s->k = l->n;
}

/*
 * Padding after each listed symbol, over the executable sections: symbols walked by start
 * address; bytes between the furthest end of the sized symbols so far and the next start (or
 * the section end) are padding, given to the symbol that reached furthest. A region starting
 * at an unsized symbol is code we cannot size, not padding.
 */
static void gaps(const struct elf *e, struct listing *l)
{
	struct span *spans = l->spans;
	uint64_t reach = 0, start, end, next, from;
	Py_ssize_t i, n = l->nspans, owner = -1;

	sort_spans(spans, n);
	for (i = 0; i < n; i++) {
		if (i == 0 || spans[i - 1].sec != spans[i].sec) {
			reach = 0;
			owner = -1;
		}
		start = spans[i].start;
		end = spans[i].end;
		from = start > reach ? start : reach;
		if (end > from)
			l->covered += end - from;
		if (end > start && end >= reach) {
			reach = end;
			owner = spans[i].k;
		}
		if (reach > start && owner >= 0) {
			next = (i + 1 < n && spans[i + 1].sec == spans[i].sec) ? spans[i + 1].start :
			       sh(e, spans[i].sec, SH_SIZE);
			if (next > reach) {
				l->gap[owner] += next - reach;
				l->padding += next - reach;
			}
		}
	}
}

/*
 * The symbols nm lists (entry 0 skipped) into L: letter, name offset, size; with FULL also
 * value and section, and when L has room for them the spans of code and the gaps. 0, or -1
 * with an exception set.
 */
int list_symbols(const struct elf *e, const struct rules *r, struct listing *l, int sized_only, int full)
{
	Py_ssize_t k, nosec[] = { 0, e->symtab, e->strtab, e->shstrndx };
	size_t i;

	for (i = 0; i < sizeof(nosec) / sizeof(nosec[0]); i++)
		if (nosec[i] >= 0 && nosec[i] < e->shnum)
			l->codes[nosec[i]] = 0;
	for (k = 1; k < e->nsyms; k++) {
		uint64_t size = sym_size(e, k);
		uint32_t shndx = sym_shndx(e, k), real = sym_section(e, k, shndx);
		uint8_t info = sym_info(e, k);
		int code = 0, common = 0;
		int64_t name;

		if (sized_only && !size)
			continue;
		if (shndx >= SHN_LORESERVE && shndx != SHN_XINDEX) {
			common = is_common(r, shndx);
			code = common ? COMMON_CODE : 0;
		} else if (real > 0 && real < e->shnum) {
			code = section_code(e, r, l->codes, real);
			if (code < 0)
				return -1;
		}
		l->letter[l->n] = r->letters[(Py_ssize_t)info << 4 | code];
		if (!l->letter[l->n])
			continue;
		name = sym_name_checked(e, k);
		if (name < 0)
			return -1;
		l->name[l->n] = (uint32_t)name;
		l->size[l->n] = size;
		if (full) {
			uint64_t v = sym_value(e, k, info);

			l->value[l->n] = v;
			l->sec[l->n] = common ? -1 : (int64_t)real;
			if (l->spans && !common && real > 0 && real < e->shnum &&
			    (sh(e, real, SH_FLAGS) & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR))
				add_span(e, l, real, v, size);
		}
		l->n++;
	}
	if (l->spans)
		gaps(e, l);
	return 0;
}

/* Add L's sized symbols to every Summary in SUMMARIES (a tuple); 0, or -1 with an exception set. */
int add_to_summaries(const struct elf *e, const struct listing *l, PyObject *summaries)
{
	Py_ssize_t k, i, len;

	for (i = 0; i < PyTuple_GET_SIZE(summaries); i++)
		if (!PyObject_TypeCheck(PyTuple_GET_ITEM(summaries, i), &SummaryType)) {
			if (!e->nogil)
				PyErr_SetString(PyExc_TypeError, "summaries: a tuple of Summary");
			return -1;
		}
	for (k = 0; k < l->n; k++) {
		const char *nm = string_at(e->str, e->strsize, l->name[k], &len);

		if (!l->size[k])
			continue;
		for (i = 0; i < PyTuple_GET_SIZE(summaries); i++)
			if ((e->nogil ? summary_add_raw : summary_add)(PyTuple_GET_ITEM(summaries, i), nm, len, l->size[k],
								       l->gap[k], l->letter[k]) < 0)
				return -1;
	}
	return 0;
}

/* A list of the N numbers at V, unsigned or (SIGNED) signed 64-bit. */
static PyObject *list_of(const void *v, Py_ssize_t n, int is_signed)
{
	PyObject *list = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; list && i < n; i++) {
		PyObject *x = is_signed ? PyLong_FromLongLong(((const int64_t *)v)[i]) :
			      PyLong_FromUnsignedLongLong(((const uint64_t *)v)[i]);

		if (!x) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, x);
	}
	return list;
}

/* The N strings at offsets NAME of the string table, decoded with ERRORS. */
static PyObject *names_of(const struct elf *e, const uint32_t *name, Py_ssize_t n, const char *errors)
{
	PyObject *list = PyList_New(n);
	Py_ssize_t i, len;

	for (i = 0; list && i < n; i++) {
		const char *s = string_at(e->str, e->strsize, name[i], &len);
		PyObject *x = PyUnicode_DecodeUTF8(s, len, errors);

		if (!x) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, x);
	}
	return list;
}

/* (names, letters, sizes, values, sections, gaps, covered, padding) of L; the FULL columns or None. */
static PyObject *listing_columns(const struct elf *e, const struct listing *l, int full)
{
	PyObject *c[6] = { NULL }, *out = NULL;
	int i;

	c[0] = names_of(e, l->name, l->n, "surrogateescape");
	c[1] = PyBytes_FromStringAndSize((const char *)l->letter, l->n);
	c[2] = list_of(l->size, l->n, 0);
	c[3] = full ? list_of(l->value, l->n, 0) : Py_NewRef(Py_None);
	c[4] = full ? list_of(l->sec, l->n, 1) : Py_NewRef(Py_None);
	c[5] = full ? list_of(l->gap, l->n, 0) : Py_NewRef(Py_None);
	if (c[0] && c[1] && c[2] && c[3] && c[4] && c[5])
		out = Py_BuildValue("(OOOOOOKK)", c[0], c[1], c[2], c[3], c[4], c[5], l->covered, l->padding);
	for (i = 0; i < 6; i++)
		Py_XDECREF(c[i]);
	return out;
}

PyDoc_STRVAR(symbols_doc,
"symbols(view, rules, *, sized_only=False, full=True, summaries=None)\n"
"-> (names, letters, sizes, values, sections, gaps, covered, padding)\n\n"
"The symbols nm lists of one member (VIEW: elf.sections.View), in symbol-table order (entry 0\n"
"skipped): names (str), letters (bytes, one per symbol), sizes; with FULL also values (Thumb\n"
"bit cleared), section indices (-1: common), the padding after each symbol, and the code bytes\n"
"covered by sized symbols and in padding (else None, None, None, 0, 0). RULES (elf.tables.Rules):\n"
"LETTERS, 4096 bytes, the letter (0: not listed) by st_info << 4 | section code; BASE, 16 bytes,\n"
"a section's code by flags & 7 | NOBITS << 3; NAME_CODE(type, flags, name), the code where the\n"
"name decides; COMMON, the reserved indices nm files as common. SUMMARIES: None, or a tuple of\n"
"Summary that the sized symbols are added to instead (the six columns then come back None).");

static PyObject *symbols(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *keywords[] = { "view", "rules", "sized_only", "full", "summaries", NULL };
	PyObject *view, *rules_tuple, *summaries = Py_None, *out = NULL;
	int sized_only = 0, full = 1;
	struct elf e;
	struct rules r;
	struct listing l = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$ppO", keywords, &view, &rules_tuple, &sized_only, &full,
					 &summaries))
		return NULL;
	if (summaries != Py_None && !PyTuple_Check(summaries)) {
		PyErr_SetString(PyExc_TypeError, "summaries: None or a tuple of Summary");
		return NULL;
	}
	if (elf_and_rules_from(view, rules_tuple, &e, &r) < 0)
		return NULL;
	if (listing_alloc(&l, &e, full, full) < 0 || list_symbols(&e, &r, &l, sized_only, full) < 0)
		goto done;
	if (summaries == Py_None)
		out = listing_columns(&e, &l, full);
	else if (add_to_summaries(&e, &l, summaries) == 0)
		out = Py_BuildValue("(OOOOOOKK)", Py_None, Py_None, Py_None, Py_None, Py_None, Py_None,
				    l.covered, l.padding);
done:
	listing_free(&l);
	rules_release(&r);
	elf_release(&e);
	return out;
}

PyDoc_STRVAR(entries_doc,
"entries(view) -> (names, values, sizes, infos, sections)\n\n"
"Every entry of the symbol table (entry 0 too: relocations index them), as columns: names (str,\n"
"undecodable bytes replaced; None for a section symbol of an existing section, which takes its\n"
"section's name), values (Thumb bit cleared), sizes, infos (bytes: st_info), sections (the\n"
"section index, SHN_XINDEX resolved; 0 when undefined, reserved or past the section table).");

static PyObject *entries(PyObject *self, PyObject *arg)
{
	PyObject *names = NULL, *values = NULL, *sizes = NULL, *infos = NULL, *secs = NULL, *out = NULL;
	struct elf e;
	Py_ssize_t k;

	if (elf_from(arg, &e) < 0)
		return NULL;
	names = PyList_New(e.nsyms);
	values = PyList_New(e.nsyms);
	sizes = PyList_New(e.nsyms);
	infos = PyBytes_FromStringAndSize(NULL, e.nsyms);
	secs = PyList_New(e.nsyms);
	if (!names || !values || !sizes || !infos || !secs)
		goto done;
	for (k = 0; k < e.nsyms; k++) {
		uint8_t info = sym_info(&e, k);
		uint32_t shndx = sym_shndx(&e, k), real = sym_section(&e, k, shndx);
		PyObject *name, *value, *size, *sec;
		Py_ssize_t len;

		if ((shndx >= SHN_LORESERVE && shndx != SHN_XINDEX) || real >= (uint64_t)e.shnum)
			real = 0;
		if ((info & 0xf) == STT_SECTION && real) {
			name = Py_NewRef(Py_None);
		} else {
			int64_t at = sym_name_checked(&e, k);
			const char *s;

			if (at < 0)
				goto done;
			s = string_at(e.str, e.strsize, at, &len);
			name = PyUnicode_DecodeUTF8(s, len, "replace");
		}
		value = PyLong_FromUnsignedLongLong(sym_value(&e, k, info));
		size = PyLong_FromUnsignedLongLong(sym_size(&e, k));
		sec = PyLong_FromUnsignedLong(real);
		PyList_SET_ITEM(names, k, name);	/* a NULL item is what PyList_New left there */
		PyList_SET_ITEM(values, k, value);
		PyList_SET_ITEM(sizes, k, size);
		PyList_SET_ITEM(secs, k, sec);
		if (!name || !value || !size || !sec)
			goto done;
		PyBytes_AS_STRING(infos)[k] = (char)info;
	}
	out = PyTuple_Pack(5, names, values, sizes, infos, secs);
done:
	Py_XDECREF(names);
	Py_XDECREF(values);
	Py_XDECREF(sizes);
	Py_XDECREF(infos);
	Py_XDECREF(secs);
	elf_release(&e);
	return out;
}

PyDoc_STRVAR(section_sizes_doc,
"section_sizes(view, groups) -> ({group: bytes}, text, rodata, data, bss)\n\n"
"The allocated sections' sizes summed by group, and by kind (code, read-only data, data, no\n"
"contents). GROUPS: a tuple of (prefix bytes, group name, whole_word) in the order tried; a name\n"
"is in the first group it starts with (followed by '.' or its end when WHOLE_WORD), else its own.");

/* GROUPS checked once: a tuple of (bytes, str, bool); the bools in WHOLE. 0, or -1 with an exception set. */
static int check_groups(PyObject *groups, char **whole)
{
	Py_ssize_t g, n;

	if (!PyTuple_Check(groups)) {
		PyErr_SetString(PyExc_TypeError, "groups: a tuple of (prefix bytes, name, whole_word)");
		return -1;
	}
	n = PyTuple_GET_SIZE(groups);
	*whole = PyMem_Malloc(n + 1);
	if (!*whole) {
		PyErr_NoMemory();
		return -1;
	}
	for (g = 0; g < n; g++) {
		PyObject *rule = PyTuple_GET_ITEM(groups, g);
		int w;

		if (!PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(rule, 0)) ||
		    !PyUnicode_Check(PyTuple_GET_ITEM(rule, 1))) {
			PyErr_SetString(PyExc_TypeError, "groups: a tuple of (prefix bytes, name, whole_word)");
			return -1;
		}
		w = PyObject_IsTrue(PyTuple_GET_ITEM(rule, 2));
		if (w < 0)
			return -1;
		(*whole)[g] = (char)w;
	}
	return 0;
}

/* The group name of section name S (LEN bytes): a new reference, or NULL with an exception set. */
static PyObject *group_of(PyObject *groups, const char *whole, const char *s, Py_ssize_t len)
{
	Py_ssize_t g;

	for (g = 0; g < PyTuple_GET_SIZE(groups); g++) {
		PyObject *rule = PyTuple_GET_ITEM(groups, g);
		const char *p = PyBytes_AS_STRING(PyTuple_GET_ITEM(rule, 0));
		Py_ssize_t plen = PyBytes_GET_SIZE(PyTuple_GET_ITEM(rule, 0));

		if (len >= plen && memcmp(s, p, plen) == 0 && (!whole[g] || len == plen || s[plen] == '.'))
			return Py_NewRef(PyTuple_GET_ITEM(rule, 1));
	}
	return PyUnicode_DecodeUTF8(s, len, "replace");
}

/* SECTIONS[KEY] += SIZE; 0, or -1 with an exception set. */
static int add_size(PyObject *sections, PyObject *key, uint64_t size)
{
	PyObject *old = PyDict_GetItemWithError(sections, key), *add, *sum;
	int rc;

	if (!old && PyErr_Occurred())
		return -1;
	add = PyLong_FromUnsignedLongLong(size);
	if (!add)
		return -1;
	sum = old ? PyNumber_Add(old, add) : Py_NewRef(add);
	Py_DECREF(add);
	if (!sum)
		return -1;
	rc = PyDict_SetItem(sections, key, sum);
	Py_DECREF(sum);
	return rc;
}

static PyObject *section_sizes(PyObject *self, PyObject *args)
{
	PyObject *view, *groups, *sections = NULL, *out = NULL;
	unsigned long long kind[4] = { 0 };
	char *whole = NULL;
	struct elf e;
	Py_ssize_t i;

	if (!PyArg_ParseTuple(args, "OO", &view, &groups))
		return NULL;
	if (elf_from(view, &e) < 0)
		return NULL;
	sections = PyDict_New();
	if (!sections || check_groups(groups, &whole) < 0)
		goto done;
	for (i = 1; i < e.shnum; i++) {
		uint64_t flags = sh(&e, i, SH_FLAGS), size = sh(&e, i, SH_SIZE), name = sh(&e, i, SH_NAME);
		const char *s;
		Py_ssize_t len;
		PyObject *key;
		int rc;

		if (!(flags & SHF_ALLOC))
			continue;
		if (name >= (uint64_t)e.shstrsize) {
			PyErr_SetString(PyExc_ValueError, "section name offset past the section name table");
			goto done;
		}
		kind[flags & SHF_EXECINSTR ? 0 : sh(&e, i, SH_TYPE) == SHT_NOBITS ? 3 : flags & SHF_WRITE ? 2 : 1] += size;
		s = string_at(e.shstr, e.shstrsize, name, &len);
		key = group_of(groups, whole, s, len);
		if (!key)
			goto done;
		rc = add_size(sections, key, size);
		Py_DECREF(key);
		if (rc < 0)
			goto done;
	}
	out = Py_BuildValue("(OKKKK)", sections, kind[0], kind[1], kind[2], kind[3]);
done:
	PyMem_Free(whole);
	Py_XDECREF(sections);
	elf_release(&e);
	return out;
}

/*
 * Code no sized symbol covers, for asm.unsized, which says what its kinds are (padding, linker
 * stubs, other code) and spells padding per target. Why C: speed. `flagbench size` sorts the
 * holes between a vmlinux's sized code symbols (20,000 of them) into those kinds, and in Python
 * the walk over its symbols, holes and their bytes took about 75 ms a side, more than the rest
 * of its default format. This finds the holes, counts those that are all padding, and hands the
 * rest back cut at their labels and stub symbols, to be sorted into pieces in Python.
 */

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

PyDoc_STRVAR(code_holes_doc,
"code_holes(view, rules, sections, padding, suffixes, read, count) -> (padding, fill, holes)\n\n"
"The code no sized symbol covers in SECTIONS ((index, base, size) each: an executable section,\n"
"where its bytes start, 0 in an object) of one member (VIEW, RULES: as symbols() takes them),\n"
"from the symbols nm lists with a name, as asm.unsized.code_map takes them: sized ones cover,\n"
"stub symbols (\"__\" target and one of SUFFIXES, bytes) and labels (unsized, not mapping\n"
"symbols or .L) cut the holes. With COUNT, the holes that are padding (PADDING: asm.unsized's\n"
"_padding_spec) are counted, padding runs of RUN bytes or more apart as fill, reading a section's\n"
"bytes (any buffer) with READ(index) once; HOLES, the rest in section order: (index, cuts, stubs), CUTS the\n"
"hole's start, the bounds inside it and its end, STUBS {address: (size, target)}. The GIL is\n"
"released while symbols are listed and sorted and bytes scanned: two members at once on two threads.");

static PyObject *code_holes(PyObject *self, PyObject *args)
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

PyDoc_STRVAR(padding_prefix_doc,
"padding_prefix(padding, raw) -> int\n\n"
"How many bytes RAW starts with that are padding (PADDING: asm.unsized's _padding_spec): x86's\n"
"fill bytes and NOPs, or whole tokens; _padding_regex(target).match(raw).end(), without importing re.");

static PyObject *padding_prefix(PyObject *self, PyObject *args)
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

static PyMethodDef methods[] = {
	{ "symbols", (PyCFunction)(void (*)(void))symbols, METH_VARARGS | METH_KEYWORDS, symbols_doc },
	{ "entries", entries, METH_O, entries_doc },
	{ "section_sizes", section_sizes, METH_VARARGS, section_sizes_doc },
	{ "code_holes", code_holes, METH_VARARGS, code_holes_doc },
	{ "padding_prefix", padding_prefix, METH_VARARGS, padding_prefix_doc },
	{ "scan_pair", scan_pair, METH_VARARGS, scan_pair_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "flagbench.elf._symtab",
	.m_doc = "The per-entry loops of flagbench.elf (symbol tables, section headers).",
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
