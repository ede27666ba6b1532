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
 * the code symbols give the holes between them that asm.unsized classifies (_holes.c), with no
 * list either.
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

void elf_release(struct elf *e)
{
	Py_buffer *b[] = { &e->b_sh, &e->b_sym, &e->b_str, &e->b_shstr, &e->b_x };
	size_t i;

	for (i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if (b[i]->obj)
			PyBuffer_Release(b[i]);
}

/* Symbol-table entry fields (inline: read once per symbol of a vmlinux, 60,000 calls each). */
static inline uint32_t sym_name(const struct elf *e, Py_ssize_t k)
{
	return rd(e->syms + (e->is64 ? 24 : 16) * k, 4, e->big);
}

static inline uint8_t sym_info(const struct elf *e, Py_ssize_t k)
{
	return e->syms[e->is64 ? 24 * k + 4 : 16 * k + 12];
}

static inline uint32_t sym_shndx(const struct elf *e, Py_ssize_t k)
{
	return rd(e->syms + (e->is64 ? 24 * k + 6 : 16 * k + 14), 2, e->big);
}

static inline uint64_t sym_size(const struct elf *e, Py_ssize_t k)
{
	return e->is64 ? rd(e->syms + 24 * k + 16, 8, e->big) : rd(e->syms + 16 * k + 8, 4, e->big);
}

/* The symbol's address, as BFD gives it: on ARM the Thumb bit of a code symbol says the mode. */
static inline uint64_t sym_value(const struct elf *e, Py_ssize_t k, uint8_t info)
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
static inline uint32_t sym_section(const struct elf *e, Py_ssize_t k, uint32_t shndx)
{
	if (shndx != SHN_XINDEX)
		return shndx;
	return k < e->nxindex ? (uint32_t)rd(e->xindex + 4 * k, 4, e->big) : 0;
}

/* Symbol K's name, checked to start inside the string table; -1 with an exception set. */
static inline int64_t sym_name_checked(const struct elf *e, Py_ssize_t k)
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

void rules_release(struct rules *r)
{
	PyBuffer_Release(&r->b_letters);
	PyBuffer_Release(&r->b_base);
}

/* Fill E from VIEW and R from RULES: 0, or -1 with an exception set and neither held. */
int elf_and_rules_from(PyObject *view, PyObject *rules, struct elf *e, struct rules *r)
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

/*
 * Spans by place, in symbol order where several start at one: gaps() gives the padding to the
 * last in symbol order of the longest of them whatever order they come in (it once sorted them
 * longest first, and one byte more of key was a third of the sort).
 */
static int span_order(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* Byte PASS of span S's place, least significant first: the start's bytes, the section's. */
static uint8_t span_byte(const struct span *s, int pass)
{
	if (pass < 8)
		return (uint8_t)(s->start >> (8 * pass));
	return (uint8_t)(s->sec >> (8 * (pass - 8)));
}

RADIX_SORT(radix_spans, struct span, span_byte, 12)

/*
 * The passes of radix_spans whose byte all N spans share, as a mask: span_byte of what the spans
 * differ in, found in one read of them (a count per pass read them a dozen times, where a
 * vmlinux's differ in four bytes).
 */
static uint32_t span_bytes_alike(const struct span *s, Py_ssize_t n)
{
	struct span differ = { 0 };
	uint32_t alike = 0;
	Py_ssize_t i;
	int pass;

	for (i = 1; i < n; i++) {
		differ.start |= s[i].start ^ s[0].start;
		differ.sec |= s[i].sec ^ s[0].sec;
	}
	for (pass = 0; pass < 12; pass++)
		if (!span_byte(&differ, pass))
			alike |= 1u << pass;
	return alike;
}

/*
 * Sort N spans into span_order, they being in symbol order already (a qsort was a tenth of
 * `flagbench size` on a vmlinux pair). Out of memory for the second array, qsort does it.
 */
static void sort_spans(struct span *spans, Py_ssize_t n)
{
	struct span *tmp = scratch_malloc(sizeof(*spans) * (n + 1));

	if (!tmp) {
		qsort(spans, n, sizeof(*spans), span_order);
		return;
	}
	radix_spans(spans, tmp, n, span_bytes_alike(spans, n));
	scratch_free(tmp);
}

/* With SPANS also room for the spans of code that gaps() sorts. */
int listing_alloc(struct listing *l, const struct elf *e, int full, int spans)
{
	Py_ssize_t m = e->nsyms + 1;

	memset(l, 0, sizeof(*l));
	l->codes = scratch_malloc(e->shnum + 1);
	l->letter = scratch_malloc(m);
	l->size = scratch_malloc(sizeof(*l->size) * m);
	l->value = scratch_malloc(sizeof(*l->value) * m);
	l->gap = scratch_calloc(m, sizeof(*l->gap));
	l->sec = scratch_malloc(sizeof(*l->sec) * m);
	l->name = scratch_malloc(sizeof(*l->name) * m);
	l->spans = spans ? scratch_malloc(sizeof(*l->spans) * m) : NULL;
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
	scratch_free(l->codes);
	scratch_free(l->letter);
	scratch_free(l->size);
	scratch_free(l->value);
	scratch_free(l->gap);
	scratch_free(l->sec);
	scratch_free(l->name);
	scratch_free(l->spans);
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
			code = l->codes[real] != UNKNOWN ? l->codes[real] : section_code(e, r, l->codes, real);
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
	Py_ssize_t i;

	for (i = 0; i < PyTuple_GET_SIZE(summaries); i++)
		if (!PyObject_TypeCheck(PyTuple_GET_ITEM(summaries, i), &SummaryType)) {
			if (!e->nogil)
				PyErr_SetString(PyExc_TypeError, "summaries: a tuple of Summary");
			return -1;
		}
	for (i = 0; i < PyTuple_GET_SIZE(summaries); i++)
		if (summary_reserve(PyTuple_GET_ITEM(summaries, i), l->n, e->strsize) < 0) {
			if (!e->nogil)
				PyErr_NoMemory();
			return -1;
		}
	for (i = 0; i < PyTuple_GET_SIZE(summaries); i++)
		if (summary_add_listing(PyTuple_GET_ITEM(summaries, i), e, l) < 0) {
			if (!e->nogil)
				PyErr_NoMemory();
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

const char symbols_doc[] =
"symbols(view, rules, *, sized_only=False, full=True, summaries=None)\n"
"-> (names, letters, sizes, values, sections, gaps, covered, padding)\n\n"
"The symbols nm lists of one member (VIEW: elf.sections.View), in symbol-table order (entry 0\n"
"skipped): names (str), letters (bytes, one per symbol), sizes; with FULL also values (Thumb\n"
"bit cleared), section indices (-1: common), the padding after each symbol, and the code bytes\n"
"covered by sized symbols and in padding (else None, None, None, 0, 0). RULES (elf.tables.Rules):\n"
"LETTERS, 4096 bytes, the letter (0: not listed) by st_info << 4 | section code; BASE, 16 bytes,\n"
"a section's code by flags & 7 | NOBITS << 3; NAME_CODE(type, flags, name), the code where the\n"
"name decides; COMMON, the reserved indices nm files as common. SUMMARIES: None, or a tuple of\n"
"Summary that the sized symbols are added to instead (the six columns then come back None).";

PyObject *py_symbols(PyObject *self, PyObject *args, PyObject *kw)
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

const char entries_doc[] =
"entries(view) -> (names, values, sizes, infos, sections)\n\n"
"Every entry of the symbol table (entry 0 too: relocations index them), as columns: names (str,\n"
"undecodable bytes replaced; None for a section symbol of an existing section, which takes its\n"
"section's name), values (Thumb bit cleared), sizes, infos (bytes: st_info), sections (the\n"
"section index, SHN_XINDEX resolved; 0 when undefined, reserved or past the section table).";

PyObject *py_entries(PyObject *self, PyObject *arg)
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

const char section_sizes_doc[] =
"section_sizes(view, groups) -> ({group: bytes}, text, rodata, data, bss)\n\n"
"The allocated sections' sizes summed by group, and by kind (code, read-only data, data, no\n"
"contents). GROUPS: a tuple of (prefix bytes, group name, whole_word) in the order tried; a name\n"
"is in the first group it starts with (followed by '.' or its end when WHOLE_WORD), else its own.";

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

PyObject *py_section_sizes(PyObject *self, PyObject *args)
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
