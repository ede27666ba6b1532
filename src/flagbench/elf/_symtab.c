/*
 * The per-entry loops of flagbench.elf.tables, in C.
 *
 * `flagbench size` promises to be several times faster than bloat-o-meter on a vmlinux pair
 * (30k symbols; bloat-o-meter takes about half a second) and on LLVM's static archives (2,500
 * members, 600k symbols). Python spends a few hundred nanoseconds on every step of every
 * symbol, and importing numpy alone costs a fifth of bloat-o-meter's whole vmlinux run, so the
 * loops over section headers and symbol-table entries live here.
 *
 * The sized symbols can go straight into bloat-o-meter's tables (_summary.c) instead of lists.
 *
 * What the rules are stays in Python: nm's letters come in as lookup tables built from
 * elf.symbols and elf.sections, a section whose letter depends on its name is asked of a
 * Python callback, and the section groups are passed in as data. The Python reader opens the
 * file, checks every table's bounds and type, and hands over the bytes; this code still checks
 * every offset it follows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_summary.h"

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
				if (summary_add(sum, nm, len, size_v[k], gap_v[k], letter[k]) < 0)
					goto done;
			}
		}
		out = Py_BuildValue("(OOOOOOKK)", Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, covered, padding);
		goto done;
	}

	letters = PyBytes_FromStringAndSize((const char *)letter, n);
	sizes = list_of(size_v, n, 0);
	if (!letters || !sizes)
		goto done;
	if (full) {
		values = list_of(value_v, n, 0);
		gap_list = list_of(gap_v, n, 0);
		secs = list_of(sec_v, n, 1);
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
