/*
 * scan_pair: both inputs of `flagbench size` read in C, each on its own thread, without the GIL.
 *
 * Why: on LLVM's static archives (2,500 members a side) the Python around the C loops of
 * _symtab.c (opening each member, its section headers, the View, a fork and marshal to read
 * the two files at once) cost three times what the loops did, and `flagbench size` is to take
 * a tenth of bloat-o-meter's time. Here the archive walk, the ELF header checks, the table
 * reads and the loops run per side on one thread each, and fill the Summary tables directly.
 *
 * The checks are elf.files' and elf.sections', in the same order; anything they would refuse
 * (or anything unusual this code does not want to judge) makes scan_pair return None, and the
 * caller reads both files again through the Python reader, which says what is wrong in its
 * own words. So this reader only ever has to be right about good input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "_elf.h"
#include "_summary.h"

#define AR_HEADER 60
#define SHT_SYMTAB 2
#define SHT_STRTAB 3
#define ET_REL 1
#define EM_ARM 40
#define EM_X86_64 62
#define SHN_COMMON 0xfff2
#define MAX_GROUPS 64
#define MAX_OWN 4096		/* distinct section names outside the groups: more, and Python reads */
#define MAX_MACHINES 32

struct group_rules {
	Py_ssize_t n;
	const char *prefix[MAX_GROUPS];
	Py_ssize_t len[MAX_GROUPS];
	char whole[MAX_GROUPS];
};

struct machine_common {		/* elf.constants.COMMON_INDICES */
	int n;
	uint32_t machine[MAX_MACHINES];
	uint32_t index[MAX_MACHINES][MAX_COMMON - 1];
	int count[MAX_MACHINES];
};

struct own {			/* an allocated section outside the groups, by its raw name */
	char *name;
	Py_ssize_t len;
	uint64_t size;
};

struct side {
	/* in */
	const char *path;
	PyObject *summaries;
	const uint8_t *letters, *base;
	PyObject *name_code;
	const struct machine_common *common;
	const struct group_rules *groups;
	int extras;
	/* out */
	int ok, machine, is64, found;
	unsigned long long kind[4], covered, padding;
	struct unsized unsized;	/* relocatable members' padding and other code, linked x86-64 members' code outside symbols */
	uint64_t group_size[MAX_GROUPS];
	char group_seen[MAX_GROUPS];	/* a section fell in (of size 0 too) */
	struct own *own;
	Py_ssize_t nown;
	uint64_t *linked;	/* archive offsets of the linked members left to asm.unsized (not x86-64) */
	Py_ssize_t nlinked, caplinked;
	/* work */
	int fd;
	uint64_t end;
	uint8_t *buf[5];
	size_t cap[5];
	char *longnames;
	size_t nlongnames;
	struct scratch scratch;	/* the members' arrays (_scratch.c) */
	const uint8_t *map;	/* the whole file, mapped when a linked x86-64 member's code is read */
};

struct member {
	uint64_t offset, size, shoff, shnum, shstrndx;
	int is64, big, machine, etype;
};

static size_t get(int fd, void *buf, size_t n, uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));

		if (r <= 0)
			break;
		done += r;
	}
	return done;
}

/* N bytes at OFF into work buffer I; NULL when they are not all there (or no memory). */
static uint8_t *read_into(struct side *s, int i, uint64_t off, uint64_t n)
{
	if (n + 1 > s->cap[i]) {
		uint8_t *p = realloc(s->buf[i], n + 1);

		if (!p)
			return NULL;
		s->buf[i] = prefaulted(p, n + 1);
		s->cap[i] = n + 1;
	}
	return get(s->fd, s->buf[i], n, off) == n ? s->buf[i] : NULL;
}

/* elf.files.elf_member: 0, or -1 where it raises. */
static int elf_member(struct side *s, const uint8_t *head, size_t hlen, uint64_t offset, uint64_t size,
		      struct member *m)
{
	uint64_t want;
	uint8_t sh0[64];

	if (size < 52 || hlen < 52 || (head[4] != 1 && head[4] != 2) || (head[5] != 1 && head[5] != 2))
		return -1;
	m->is64 = head[4] == 2;
	m->big = head[5] == 2;
	m->offset = offset;
	m->size = size;
	m->etype = (int)rd(head + 16, 2, m->big);
	m->machine = (int)rd(head + 18, 2, m->big);
	if (m->is64) {
		if (size < 64 || hlen < 64)
			return -1;
		m->shoff = rd(head + 40, 8, m->big);
		if (rd(head + 58, 2, m->big) != 64)
			return -1;
		m->shnum = rd(head + 60, 2, m->big);
		m->shstrndx = rd(head + 62, 2, m->big);
		want = 64;
	} else {
		m->shoff = rd(head + 32, 4, m->big);
		if (rd(head + 46, 2, m->big) != 40)
			return -1;
		m->shnum = rd(head + 48, 2, m->big);
		m->shstrndx = rd(head + 50, 2, m->big);
		want = 40;
	}
	if (m->shoff == 0 || m->shoff > size || want > size - m->shoff)
		return -1;
	if (m->shnum == 0 || m->shstrndx == SHN_XINDEX) {
		if (get(s->fd, sh0, want, offset + m->shoff) != want)
			return -1;
		if (m->shnum == 0)
			m->shnum = m->is64 ? rd(sh0 + 32, 8, m->big) : rd(sh0 + 20, 4, m->big);
		if (m->shstrndx == SHN_XINDEX)
			m->shstrndx = m->is64 ? rd(sh0 + 40, 4, m->big) : rd(sh0 + 24, 4, m->big);
	}
	if (m->shnum == 0 || m->shnum > (size - m->shoff) / want || m->shstrndx >= m->shnum || m->shstrndx == 0)
		return -1;
	return 0;
}

/* elf.sections.table_range: (file offset, size) of section I of M; -1 where it raises. */
static int table_range(const struct elf *e, const struct member *m, uint64_t i, uint64_t *off, uint64_t *size)
{
	if (i == 0 || i >= (uint64_t)e->shnum)
		return -1;
	*off = sh(e, i, SH_OFFSET);
	*size = sh(e, i, SH_TYPE) == SHT_NOBITS ? 0 : sh(e, i, SH_SIZE);
	if (*off > m->size || *size > m->size - *off)
		return -1;
	*off += m->offset;
	return 0;
}

static int add_own(struct side *s, const char *name, Py_ssize_t len, uint64_t size)
{
	Py_ssize_t i;

	for (i = 0; i < s->nown; i++)
		if (s->own[i].len == len && memcmp(s->own[i].name, name, len) == 0) {
			s->own[i].size += size;
			return 0;
		}
	if (s->nown == MAX_OWN)
		return -1;
	if (!s->own && !(s->own = calloc(MAX_OWN, sizeof(*s->own))))
		return -1;
	if (!(s->own[i].name = malloc(len + 1)))
		return -1;
	memcpy(s->own[i].name, name, len);
	s->own[i].len = len;
	s->own[i].size = size;
	s->nown++;
	return 0;
}

/* _symtab.section_sizes, summed into the side; the member's code bytes in *CODE. -1 where it raises. */
static int section_sizes(struct side *s, const struct elf *e, unsigned long long *code)
{
	const struct group_rules *gr = s->groups;
	Py_ssize_t i, g, len;

	*code = 0;
	for (i = 1; i < e->shnum; i++) {
		uint64_t flags = sh(e, i, SH_FLAGS), size = sh(e, i, SH_SIZE), name = sh(e, i, SH_NAME);
		const char *n;
		int k;

		if (!(flags & SHF_ALLOC))
			continue;
		if (name >= (uint64_t)e->shstrsize)
			return -1;
		k = flags & SHF_EXECINSTR ? 0 : sh(e, i, SH_TYPE) == SHT_NOBITS ? 3 : flags & SHF_WRITE ? 2 : 1;
		s->kind[k] += size;
		if (k == 0)
			*code += size;
		n = string_at(e->shstr, e->shstrsize, name, &len);
		for (g = 0; g < gr->n; g++)
			if (len >= gr->len[g] && memcmp(n, gr->prefix[g], gr->len[g]) == 0 &&
			    (!gr->whole[g] || len == gr->len[g] || n[gr->len[g]] == '.'))
				break;
		if (g < gr->n) {
			s->group_size[g] += size;
			s->group_seen[g] = 1;
		}
		else if (add_own(s, n, len, size) < 0)
			return -1;
	}
	return 0;
}

/* The whole file mapped (once): 0, or -1 when it cannot be. */
static int mapped(struct side *s)
{
	void *p;

	if (s->map)
		return 0;
	p = mmap(NULL, s->end, PROT_READ, MAP_PRIVATE, s->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	s->map = p;
	return 0;
}

/*
 * Table I of member M (N bytes at OFF): a large one is read where the file is mapped (as
 * linked_x86 maps it for the code), not copied into fresh memory: a vmlinux's symbol and string
 * tables are a megabyte, 260 pages to zero and copy a side at about 1 us a page in this VM,
 * where the file's pages, already cached, map 16 to a fault. A small one: read_into. (As with the
 * code linked_x86 reads, a file cut short by another program while it is read would fault here.)
 */
static const uint8_t *table_at(struct side *s, int i, uint64_t off, uint64_t n)
{
	if (n >= (64 << 10) && mapped(s) == 0)
		return s->map + off;
	return read_into(s, i, off, n);
}

/* Linked member M (E, its listing L): its code outside symbols summed here when it is x86-64's; 1 then, else 0. */
static int linked_x86(struct side *s, const struct member *m, const struct elf *e, const struct listing *l)
{
	struct unsized u;

	if (m->machine != EM_X86_64 || mapped(s) < 0)
		return 0;
	if (x86_unsized(e, l, s->map + m->offset, m->size, &u) < 0)
		return 0;
	s->unsized.stub += u.stub;
	s->unsized.padding += u.padding;
	s->unsized.fill += u.fill;
	s->unsized.other += u.other;
	s->unsized.stubs += u.stubs;
	return 1;
}

/* elf.tables.read_member and size.symbols.read_side's per-member part: 0, or -1 to read in Python. */
static int read_member(struct side *s, const struct member *m)
{
	uint64_t want = m->is64 ? 64 : 40, entsize = m->is64 ? 24 : 16, off, size, i, symtab;
	struct elf e = { 0 };
	struct rules r = { 0 };
	struct listing l = { 0 };
	unsigned long long code;
	int c, rc = -1;

	e.is64 = m->is64;
	e.big = m->big;
	e.nogil = 1;
	e.shnum = (Py_ssize_t)m->shnum;
	if (!(e.shdrs = read_into(s, 0, m->offset + m->shoff, m->shnum * want)))
		return -1;
	for (symtab = 0; symtab < m->shnum && sh(&e, symtab, SH_TYPE) != SHT_SYMTAB; symtab++)
		;
	if (symtab == m->shnum || sh(&e, symtab, SH_SIZE) < entsize)
		return 0;	/* no symbol table: the member is not listed */
	s->found = 1;
	/* the section name table, the symbol table, its string table, as elf.sections.view reads them */
	if (table_range(&e, m, m->shstrndx, &off, &size) < 0 || sh(&e, m->shstrndx, SH_TYPE) != SHT_STRTAB ||
	    !(e.shstr = read_into(s, 1, off, size)))
		return -1;
	e.shstrsize = (Py_ssize_t)size;
	if (table_range(&e, m, symtab, &off, &size) < 0 || !(e.syms = table_at(s, 2, off, size)))
		return -1;
	e.nsyms = (Py_ssize_t)(size / entsize);
	e.strtab = (Py_ssize_t)sh(&e, symtab, SH_LINK);
	if (table_range(&e, m, e.strtab, &off, &size) < 0 || sh(&e, e.strtab, SH_TYPE) != SHT_STRTAB ||
	    !(e.str = table_at(s, 3, off, size)))
		return -1;
	e.strsize = (Py_ssize_t)size;
	e.xindex = (const uint8_t *)"";
	if (m->shnum >= SHN_LORESERVE)
		for (i = 0; i < m->shnum; i++)
			if (sh(&e, i, SH_TYPE) == SHT_SYMTAB_SHNDX && sh(&e, i, SH_LINK) == symtab) {
				if (table_range(&e, m, i, &off, &size) < 0 || !(e.xindex = read_into(s, 4, off, size - size % 4)))
					return -1;
				e.nxindex = (Py_ssize_t)(size / 4);
				break;
			}
	e.symtab = (Py_ssize_t)symtab;
	e.shstrndx = (Py_ssize_t)m->shstrndx;
	e.relocatable = m->etype == ET_REL;
	e.thumb = m->machine == EM_ARM;
	/* elf.tables.rules(machine) */
	r.letters = s->letters;
	r.base = s->base;
	r.name_code = s->name_code;
	r.common[r.ncommon++] = SHN_COMMON;
	for (i = 0; i < (uint64_t)s->common->n; i++)
		if (s->common->machine[i] == (uint32_t)m->machine)
			for (c = 0; c < s->common->count[i]; c++)
				r.common[r.ncommon++] = s->common->index[i][c];
	if (listing_alloc(&l, &e, s->extras, s->extras) < 0 || list_symbols(&e, &r, &l, !s->extras, s->extras) < 0 ||
	    add_to_summaries(&e, &l, s->summaries) < 0)
		goto done;
	if (s->extras) {
		if (section_sizes(s, &e, &code) < 0)
			goto done;
		s->covered += l.covered;
		s->padding += l.padding;
		if (m->etype == ET_REL) {	/* size.symbols._unsized: a relocatable member's own sums */
			s->unsized.padding += l.padding;
			if (code > l.covered + l.padding)
				s->unsized.other += code - l.covered - l.padding;
		} else if (!linked_x86(s, m, &e, &l)) {	/* classified by asm.unsized, in Python */
			if (s->nlinked == s->caplinked) {
				Py_ssize_t cap = 2 * s->caplinked + 8;
				uint64_t *p = realloc(s->linked, cap * sizeof(*p));

				if (!p)
					goto done;
				s->linked = p;
				s->caplinked = cap;
			}
			s->linked[s->nlinked++] = m->offset;
		}
	}
	rc = 0;
done:
	listing_free(&l);
	return rc;
}

static int all_digits(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return 0;
	return n > 0 && n <= 18;
}

static uint64_t number(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = 10 * v + (p[i] - '0');
	return v;
}

static int is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* One archive member (elf.files._archive_members' loop body); *POS moves to the next. -1 where it raises. */
static int archive_member(struct side *s, uint64_t *pos, int *first)
{
	uint8_t chunk[AR_HEADER + 64], *field;
	uint64_t size, data, start, length, n;
	size_t got = get(s->fd, chunk, sizeof(chunk), *pos), flen, rlen, hlen, i;
	const uint8_t *head;
	uint8_t bsd[64];
	struct member m;

	if (*pos + AR_HEADER > s->end) {
		for (i = 0; i < got; i++)
			if (chunk[i] != '\n')
				return -1;
		*pos = s->end;
		return 0;
	}
	if (got < AR_HEADER || chunk[58] != '`' || chunk[59] != '\n')
		return -1;
	field = chunk + 48;
	flen = 10;
	while (flen && is_space(*field))
		field++, flen--;
	while (flen && is_space(field[flen - 1]))
		flen--;
	if (!all_digits(field, flen))
		return -1;
	size = number(field, flen);
	data = *pos + AR_HEADER;
	if (size > s->end - data)
		return -1;
	for (rlen = 16; rlen && chunk[rlen - 1] == ' '; rlen--)
		;
	start = data;
	length = size;
	head = chunk + AR_HEADER;
	hlen = got - AR_HEADER < size ? got - AR_HEADER : size;
#define RAW_IS(lit) (rlen == sizeof(lit) - 1 && memcmp(chunk, lit, rlen) == 0)
	if (RAW_IS("/") || RAW_IS("/SYM64/") || RAW_IS("__.SYMDEF") || RAW_IS("__.SYMDEF SORTED")) {
		hlen = 0;	/* the symbol index */
	} else if (RAW_IS("//")) {
		free(s->longnames);
		s->nlongnames = size;
		if (!(s->longnames = malloc(size + 1)) || get(s->fd, s->longnames, size, data) != size)
			return -1;
		hlen = 0;
	} else if (rlen >= 3 && memcmp(chunk, "#1/", 3) == 0) {
		if (!all_digits(chunk + 3, rlen - 3) || (n = number(chunk + 3, rlen - 3)) > size)
			return -1;
		got = get(s->fd, bsd, sizeof(bsd), data + n);
		start = data + n;
		length = size - n;
		head = bsd;
		hlen = got < length ? got : length;
	} else if (rlen >= 2 && chunk[0] == '/' && all_digits(chunk + 1, rlen - 1)) {
		n = number(chunk + 1, rlen - 1);	/* an offset into the `//` table, "/\n"-terminated */
		if (n >= s->nlongnames)
			return -1;
		for (i = n; i + 1 < s->nlongnames && !(s->longnames[i] == '/' && s->longnames[i + 1] == '\n'); i++)
			;
		if (i + 1 >= s->nlongnames)
			return -1;
	} else if (rlen >= 2 && chunk[0] == '/') {
		return -1;	/* "/" and something not a number: unusual; Python's reader decides */
	}
#undef RAW_IS
	if (hlen >= 4 && memcmp(head, "\x7f" "ELF", 4) == 0) {
		if (elf_member(s, head, hlen, start, length, &m) < 0)
			return -1;
		if (*first) {
			s->machine = m.machine;
			s->is64 = m.is64;
			*first = 0;
		}
		if (read_member(s, &m) < 0)
			return -1;
	}
	*pos = data + size + (size & 1);
	return 0;
}

/* elf.files.open_input and size.symbols.read_side: S->ok when the whole file was read. */
static void read_file(struct side *s)
{
	uint8_t head[64];
	struct stat st;
	size_t got;
	struct member m;
	uint64_t pos = 8;
	int first = 1;

	s->fd = open(s->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (s->fd < 0)
		return;
	if (fstat(s->fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return;
	s->end = (uint64_t)st.st_size;
	/* room for the largest member's arrays (a few hundred bytes a symbol): at worst, malloc's */
	scratch_open(&s->scratch, s->end < (64 << 20) ? (size_t)s->end * 16 + (4 << 20) : (size_t)1 << 30);
	got = get(s->fd, head, sizeof(head), 0);
	if (got >= 8 && memcmp(head, "!<arch>\n", 8) == 0) {
		while (pos < s->end)
			if (archive_member(s, &pos, &first) < 0)
				return;
		if (first)
			return;	/* no ELF member */
	} else if (got >= 4 && memcmp(head, "\x7f" "ELF", 4) == 0) {
		if (elf_member(s, head, got, 0, s->end, &m) < 0)
			return;
		s->machine = m.machine;
		s->is64 = m.is64;
		if (read_member(s, &m) < 0)
			return;
	} else {
		return;
	}
	s->ok = s->found;	/* no symbol table anywhere: Python's reader says so */
}

/*
 * read_file(ARG) on its thread, its arrays on the side's scratch (_scratch.c). The scratch and
 * the file's mapping go when it returns, on this thread: the two sides unmap at once, not one
 * after the other once both are read (a vmlinux's mapping has some thousand pages to let go).
 */
static void *read_side(void *arg)
{
	struct side *s = arg;

	read_file(s);
	scratch_close(&s->scratch);
	if (s->map)
		munmap((void *)s->map, s->end);
	s->map = NULL;
	return NULL;
}

/* The CPUs the calling thread may use; COUNT 0 when start_elsewhere pinned nothing. */
struct cpus {
	cpu_set_t set;
	int count;
};

/*
 * FN(ARG) on a new thread kept off the CPU the caller runs on (*ALL: what to give it back with
 * allowed_everywhere). Why: a scheduler may put a new thread beside its parent until load
 * balancing moves it. This VM's kernel packs vCPUs (sched_vcpu_pack=15 on its command line): in
 * 32 of 60 runs of `flagbench size` the other side's thread started 1.5-3.8 ms late and the two
 * sides took turns on one CPU; pinned, in 0 of 60, and the pair was read in 4.3 ms, not 5.6
 * (medians). 0, or -1 when no thread could be started.
 */
static int start_elsewhere(pthread_t *thread, void *(*fn)(void *), void *arg, struct cpus *all)
{
	pthread_attr_t attr;
	cpu_set_t others;
	int here = sched_getcpu(), ok;

	all->count = 0;
	if (pthread_attr_init(&attr) != 0)
		return pthread_create(thread, NULL, fn, arg) == 0 ? 0 : -1;
	if (here >= 0 && here < CPU_SETSIZE && sched_getaffinity(0, sizeof(all->set), &all->set) == 0 &&
	    CPU_ISSET(here, &all->set) && CPU_COUNT(&all->set) > 1) {
		others = all->set;
		CPU_CLR(here, &others);
		if (pthread_attr_setaffinity_np(&attr, sizeof(others), &others) == 0)
			all->count = CPU_COUNT(&all->set);
	}
	ok = pthread_create(thread, &attr, fn, arg) == 0;
	pthread_attr_destroy(&attr);
	return ok ? 0 : -1;
}

/* THREAD may run anywhere again: once this side is read, it can finish here if the others are
 * busy. (One that has ended already has no thread id: glibc then asks this for the caller, whose
 * CPUs are these already.) */
static void allowed_everywhere(pthread_t thread, const struct cpus *all)
{
	if (all->count)
		pthread_setaffinity_np(thread, sizeof(all->set), &all->set);
}

static void side_free(struct side *s)
{
	Py_ssize_t i;

	if (s->fd >= 0)
		close(s->fd);
	for (i = 0; i < 5; i++)
		free(s->buf[i]);
	for (i = 0; i < s->nown; i++)
		free(s->own[i].name);
	free(s->own);
	free(s->linked);
	free(s->longnames);	/* (the mapping and the scratch went with read_side) */
}

/* (machine, is64, sections, (text, rodata, data, bss), covered, padding, (stub, ... stubs), linked) */
static PyObject *side_result(struct side *s, PyObject *groups)
{
	PyObject *sections = PyDict_New(), *linked = PyList_New(s->nlinked), *out = NULL;
	Py_ssize_t i;

	if (!sections || !linked)
		goto done;
	for (i = 0; i < s->nlinked; i++) {
		PyObject *v = PyLong_FromUnsignedLongLong(s->linked[i]);

		if (!v)
			goto done;
		PyList_SET_ITEM(linked, i, v);
	}
	/* as _symtab.section_sizes names them: the group's name, else the section's own (decoded with "replace") */
	for (i = 0; i < s->groups->n + s->nown; i++) {
		int own = i >= s->groups->n;
		uint64_t size = own ? s->own[i - s->groups->n].size : s->group_size[i];
		PyObject *key, *old, *add, *sum;
		int rc;

		if (!own && !s->group_seen[i])	/* a group no section fell in: absent, as there */
			continue;
		key = own ? PyUnicode_DecodeUTF8(s->own[i - s->groups->n].name, s->own[i - s->groups->n].len, "replace")
			  : Py_NewRef(PyTuple_GET_ITEM(PyTuple_GET_ITEM(groups, i), 1));
		if (!key)
			goto done;
		old = PyDict_GetItemWithError(sections, key);	/* two raw names may decode alike */
		add = PyLong_FromUnsignedLongLong(size);
		sum = !add ? NULL : old ? PyNumber_Add(old, add) : Py_NewRef(add);
		rc = sum ? PyDict_SetItem(sections, key, sum) : -1;
		Py_XDECREF(add);
		Py_XDECREF(sum);
		Py_DECREF(key);
		if (rc < 0)
			goto done;
	}
	out = Py_BuildValue("(iiO(KKKK)KK(KKKKK)O)", s->machine, s->is64, sections, s->kind[0], s->kind[1], s->kind[2],
			    s->kind[3], s->covered, s->padding, s->unsized.stub, s->unsized.padding, s->unsized.fill,
			    s->unsized.other, s->unsized.stubs, linked);
done:
	Py_XDECREF(sections);
	Py_XDECREF(linked);
	return out;
}

/* The tuples scan_pair takes, checked and copied into C (with the GIL). -1 with an exception set. */
static int groups_from(PyObject *groups, struct group_rules *g)
{
	Py_ssize_t i;

	if (!PyTuple_Check(groups) || PyTuple_GET_SIZE(groups) > MAX_GROUPS) {
		PyErr_SetString(PyExc_TypeError, "groups: a tuple of at most 64 (prefix bytes, name, whole_word)");
		return -1;
	}
	g->n = PyTuple_GET_SIZE(groups);
	for (i = 0; i < g->n; i++) {
		PyObject *rule = PyTuple_GET_ITEM(groups, i);
		int w;

		if (!PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(rule, 0)) ||
		    !PyUnicode_Check(PyTuple_GET_ITEM(rule, 1)) || (w = PyObject_IsTrue(PyTuple_GET_ITEM(rule, 2))) < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "groups: a tuple of (prefix bytes, name, whole_word)");
			return -1;
		}
		g->prefix[i] = PyBytes_AS_STRING(PyTuple_GET_ITEM(rule, 0));
		g->len[i] = PyBytes_GET_SIZE(PyTuple_GET_ITEM(rule, 0));
		g->whole[i] = (char)w;
	}
	return 0;
}

static int common_from(PyObject *dict, struct machine_common *c)
{
	PyObject *key, *value;
	Py_ssize_t pos = 0, i;

	if (!PyDict_Check(dict) || PyDict_GET_SIZE(dict) > MAX_MACHINES)
		goto bad;
	while (PyDict_Next(dict, &pos, &key, &value)) {
		if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) > MAX_COMMON - 1)
			goto bad;
		c->machine[c->n] = (uint32_t)PyLong_AsUnsignedLong(key);
		for (i = 0; i < PyTuple_GET_SIZE(value); i++)
			c->index[c->n][i] = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(value, i));
		c->count[c->n++] = (int)PyTuple_GET_SIZE(value);
		if (PyErr_Occurred())
			return -1;
	}
	return 0;
bad:
	PyErr_SetString(PyExc_TypeError, "common: {machine: (section index, ...)}, a few");
	return -1;
}

static int summaries_ok(PyObject *t)
{
	Py_ssize_t i;

	if (!PyTuple_Check(t))
		return 0;
	for (i = 0; i < PyTuple_GET_SIZE(t); i++)
		if (!PyObject_TypeCheck(PyTuple_GET_ITEM(t, i), &SummaryType))
			return 0;
	return 1;
}

const char scan_pair_doc[] =
"scan_pair(old, new, old_summaries, new_summaries, letters, base, name_code, common, extras, groups)\n"
"-> (old_side, new_side), or None\n\n"
"Read both files' nm-listed symbols into their Summary tables (tuples of Summary), each file\n"
"on its own thread: what elf.tables.read_members and size.symbols.read_side do, member by\n"
"member. LETTERS, BASE, NAME_CODE: elf.tables.Rules' fields; COMMON: elf.constants.COMMON_INDICES;\n"
"GROUPS: as section_sizes takes them. A side: (machine, is64, {section group: bytes}, (text,\n"
"rodata, data, bss), covered, padding, (stub, padding, fill, other, stubs): the code outside sized\n"
"symbols of the relocatable members (their own sums) and linked x86-64 members (summed as\n"
"asm.unsized.CodeMap.totals() sums it), [offsets of the other linked members, for asm.unsized]),\n"
"the EXTRAS fields zero without it. None: something in either file is not as this reader\n"
"expects (damage, an unusual archive): the summaries may hold part of it; the caller makes new\n"
"ones and reads with the Python reader, which says what.";

PyObject *scan_pair(PyObject *self, PyObject *args)
{
	PyObject *paths[2], *summaries[2], *name_code, *common, *groups, *out = NULL, *a = NULL, *b = NULL;
	Py_buffer letters, base;
	struct group_rules gr = { 0 };
	struct machine_common mc = { 0 };
	struct side sides[2];
	pthread_t thread;
	struct cpus cpus;
	int extras, i, threaded;

	if (!PyArg_ParseTuple(args, "O&O&OOy*y*OOpO", PyUnicode_FSConverter, &paths[0], PyUnicode_FSConverter,
			      &paths[1], &summaries[0], &summaries[1], &letters, &base, &name_code, &common, &extras,
			      &groups))
		return NULL;
	memset(sides, 0, sizeof(sides));
	if (letters.len != 4096 || base.len != 16 || !summaries_ok(summaries[0]) || !summaries_ok(summaries[1])) {
		PyErr_SetString(PyExc_ValueError, "letters: 4096 bytes; base: 16; summaries: tuples of Summary");
		goto done;
	}
	if (groups_from(groups, &gr) < 0 || common_from(common, &mc) < 0)
		goto done;
	for (i = 0; i < 2; i++) {
		sides[i].fd = -1;
		sides[i].path = PyBytes_AS_STRING(paths[i]);
		sides[i].summaries = summaries[i];
		sides[i].letters = letters.buf;
		sides[i].base = base.buf;
		sides[i].name_code = name_code;
		sides[i].common = &mc;
		sides[i].groups = &gr;
		sides[i].extras = extras;
	}
	Py_BEGIN_ALLOW_THREADS
	threaded = start_elsewhere(&thread, read_side, &sides[0], &cpus) == 0;
	if (!threaded)
		read_side(&sides[0]);
	read_side(&sides[1]);
	if (threaded) {
		allowed_everywhere(thread, &cpus);
		pthread_join(thread, NULL);
	}
	Py_END_ALLOW_THREADS
	if (!sides[0].ok || !sides[1].ok) {
		out = Py_NewRef(Py_None);
		goto done;
	}
	a = side_result(&sides[0], groups);
	b = side_result(&sides[1], groups);
	if (a && b)
		out = PyTuple_Pack(2, a, b);
done:
	Py_XDECREF(a);
	Py_XDECREF(b);
	side_free(&sides[0]);
	side_free(&sides[1]);
	PyBuffer_Release(&letters);
	PyBuffer_Release(&base);
	Py_DECREF(paths[0]);
	Py_DECREF(paths[1]);
	return out;
}
