/*
 * _elf.h: what _symtab.c shares with _scan.c (the reader of `flagbench size` without the GIL)
 * and _holes.c (the code outside sized symbols): one member's tables, nm's rules, the listing
 * of its symbols and the loops that fill it.
 */
#ifndef FLAGBENCH_ELF_H
#define FLAGBENCH_ELF_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHF_WRITE 0x1
#define SHF_ALLOC 0x2
#define SHF_EXECINSTR 0x4
#define SHT_NOBITS 8
#define SHT_REL 9
#define SHT_RELA 4
#define SHT_SYMTAB_SHNDX 18
#define SHN_LORESERVE 0xff00
#define SHN_XINDEX 0xffff
#define STT_FUNC 2
#define STT_SECTION 3
#define STT_GNU_IFUNC 10
#define UNKNOWN 0xff
#define COMMON_CODE 11		/* elf.tables.LETTER_CODES: COMMON is last */
#define MAX_COMMON 8

/* One member's tables: elf.sections.View, field by field. */
struct elf {
	Py_buffer b_sh, b_sym, b_str, b_shstr, b_x;
	const uint8_t *shdrs, *syms, *str, *shstr, *xindex;
	Py_ssize_t shnum, nsyms, strsize, shstrsize, nxindex;
	Py_ssize_t symtab, strtab, shstrndx;
	int is64, big, relocatable, thumb;
	int nogil;		/* no exceptions set (scan.c: no GIL held; the caller reads again in Python) */
};

/* nm's rules, as elf.tables.Rules holds them. */
struct rules {
	Py_buffer b_letters, b_base;
	const uint8_t *letters, *base;
	PyObject *name_code;
	uint32_t common[MAX_COMMON];
	int ncommon;
};

struct span {
	uint64_t start, end;
	uint32_t sec;
	Py_ssize_t k;
};

/* The listed symbols of one member, N of them, column by column. */
struct listing {
	Py_ssize_t n, nspans;
	uint8_t *codes, *letter;	/* per section; per symbol */
	uint64_t *size, *value, *gap;
	int64_t *sec;
	uint32_t *name;
	struct span *spans;
	unsigned long long covered, padding;
};

/* _scratch.c: a side's arrays, on its own pages (huge ones where the kernel gives them). */
struct scratch {
	uint8_t *map, *base, *next, *end, *last;	/* last: the newest array */
	uint8_t *populated;	/* its pages up to here are present */
	size_t maplen;
	Py_ssize_t live;	/* arrays not yet freed: at 0 the scratch rewinds */
};
extern __thread struct scratch *scratch_of_thread;
uint8_t *huge_pages(size_t bytes, uint8_t **map, size_t *maplen);
int scratch_open(struct scratch *s, size_t bytes);
void scratch_close(struct scratch *s);
void *scratch_malloc(size_t n);	/* its pages present, as prefaulted() makes them */
void *scratch_calloc(size_t n, size_t size);
void scratch_free(void *p);

/*
 * P (N bytes of fresh memory, about to be filled) with its pages present, asked for in one call
 * (MADV_POPULATE_WRITE, Linux 5.14) instead of taken one fault at a time: a vmlinux's symbol
 * arrays are megabytes, a page fault costs about 2.5 us in a VM (measured here, 0.03 us a page
 * populated), and `flagbench size`'s default format took some 4,000 of them on a vmlinux pair.
 * P may be NULL. An older kernel's EINVAL changes nothing: the pages then fault in as before.
 */
static inline void *prefaulted(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	if (p && n >= (64 << 10)) {	/* 16 pages or more: below, the call costs what it saves */
		uintptr_t page = (uintptr_t)getpagesize(), a = ((uintptr_t)p + page - 1) & ~(page - 1);
		uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);

		if (b > a)
			madvise((void *)a, b - a, MADV_POPULATE_WRITE);
	}
#endif
	return p;
}

/* Section header fields (sh()). */
enum { SH_NAME, SH_TYPE, SH_FLAGS, SH_ADDR, SH_OFFSET, SH_SIZE, SH_LINK, SH_INFO, SH_ADDRALIGN, SH_ENTSIZE };

/* Little- or big-endian fields, N bytes at P (x86's hosts: little-endian memcpy loads). */
static inline uint64_t rd(const uint8_t *p, int n, int big)
{
	uint64_t v = 0;
	int i;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (!big) {	/* the common case, a load the compiler sees through */
		if (n == 8) {
			memcpy(&v, p, 8);
			return v;
		}
		if (n == 4) {
			uint32_t w;

			memcpy(&w, p, 4);
			return w;
		}
		if (n == 2) {	/* a symbol's section index */
			uint16_t h;

			memcpy(&h, p, 2);
			return h;
		}
	}
#endif
	for (i = 0; i < n; i++)
		v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
	return v;
}

/* Section header fields: Elf64 and Elf32 put them at different offsets and widths. */
static const int sh64_off[] __attribute__((unused)) = { 0, 4, 8, 16, 24, 32, 40, 44, 48, 56 },
		 sh64_len[] = { 4, 4, 8, 8, 8, 8, 4, 4, 8, 8 };

static inline uint64_t sh(const struct elf *e, Py_ssize_t i, int field)
{
	if (e->is64)
		return rd(e->shdrs + 64 * i + sh64_off[field], sh64_len[field], e->big);
	return rd(e->shdrs + 40 * i + 4 * field, 4, e->big);
}

/*
 * NAME(a, tmp, n, alike): a stable sort of the N records of TYPE at A (TMP: room for N more) by
 * their key bytes BYTE(record, pass), least significant first, PASSES of them: a counting pass
 * per byte, skipped where every record has the same one (a vmlinux's symbols in a qsort took
 * 600,000 calls of a comparison), not even counted where the caller knows so (bit PASS of ALIKE).
 */
#define RADIX_SORT(NAME, TYPE, BYTE, PASSES)						\
static void NAME(TYPE *a, TYPE *tmp, Py_ssize_t n, uint32_t alike)			\
{											\
	TYPE *from = a, *to = tmp, *swap;						\
	Py_ssize_t count[256], i, at, c;						\
	int pass;									\
											\
	for (pass = 0; pass < (PASSES) && n > 0; pass++) {				\
		if (alike >> pass & 1)							\
			continue;							\
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

/* The NUL-terminated string at OFFSET of a table of SIZE bytes (OFFSET < SIZE), its length in *LEN.
 * Inline: it is asked once per symbol, and the call cost a third of what strnlen does. */
static inline const char *string_at(const uint8_t *table, Py_ssize_t size, uint64_t offset, Py_ssize_t *len)
{
	const char *s = (const char *)table + offset;

	*len = (Py_ssize_t)strnlen(s, size - offset);
	return s;
}
int section_code(const struct elf *e, const struct rules *r, uint8_t *codes, Py_ssize_t i);
int listing_alloc(struct listing *l, const struct elf *e, int full, int spans);
void listing_free(struct listing *l);
int list_symbols(const struct elf *e, const struct rules *r, struct listing *l, int sized_only, int full);
int add_to_summaries(const struct elf *e, const struct listing *l, PyObject *summaries);
int elf_and_rules_from(PyObject *view, PyObject *rules, struct elf *e, struct rules *r);
void elf_release(struct elf *e);
void rules_release(struct rules *r);

/* _symtab.c: the Python functions over one member's tables (the module is _module.c) */
PyObject *py_symbols(PyObject *self, PyObject *args, PyObject *kw);
PyObject *py_entries(PyObject *self, PyObject *arg);
PyObject *py_section_sizes(PyObject *self, PyObject *args);
extern const char symbols_doc[], entries_doc[], section_sizes_doc[];

/* _scan.c: both inputs of `flagbench size` at once, without the GIL */
PyObject *scan_pair(PyObject *self, PyObject *args);
extern const char scan_pair_doc[];

/* _holes.c: the code outside sized symbols, for asm.unsized and, x86-64's summed, for _scan.c */
PyObject *code_holes(PyObject *self, PyObject *args);
PyObject *padding_prefix(PyObject *self, PyObject *args);
extern const char code_holes_doc[], padding_prefix_doc[];
int add_holes_constants(PyObject *module);

/* Bytes of code outside sized symbols by kind, and how many stubs: asm.unsized.CodeMap.totals(). */
struct unsized {
	unsigned long long stub, padding, fill, other, stubs;
};

int x86_unsized(const struct elf *e, const struct listing *l, const uint8_t *bytes, uint64_t size, struct unsized *u);

#endif
