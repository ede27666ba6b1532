/*
 * Scratch memory for the arrays a member's read lives on (its listing, its code's holes) while
 * `flagbench size` reads a side on its thread (_scan.c): one reservation of address space per
 * side, handed out from the bottom and rewound when the last array is freed (or the newest, when
 * it goes first: a sort's buffer), so an archive's members reuse the same pages; and backed by
 * transparent huge pages where the kernel gives them.
 *
 * Why: a vmlinux's arrays are megabytes a side, and the kernel's work to give and take back
 * their 4 KB pages was a tenth of the default format's CPU on a tinyconfig vmlinux pair (perf,
 * cpu-clock). Populating 4 MB here took 1.1-1.9 ms in 4 KB pages and 0.11 ms in 2 MB ones; but a
 * huge page is zeroed whole, so the arrays are kept within as few as they need (a tinyconfig
 * vmlinux's fit one 2 MB page a side: the bounds array, sized for every symbol and seldom more
 * than a page of it used, is malloc's). Where the kernel gives no huge page (THP off, memory
 * fragmented) the pages are 4 KB ones, as before. Outside a side's read (the readers called from
 * Python), and when the reservation is spent, the arrays come from PyMem_Raw* as before.
 */
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "_elf.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define ALIGN 64

__thread struct scratch *scratch_of_thread;

/*
 * BYTES of zeroed memory (rounded up to whole huge pages) on huge pages where the kernel gives
 * them: its start, 2 MB-aligned; *MAP and *MAPLEN are what to munmap. NULL when it cannot be mapped.
 */
uint8_t *huge_pages(size_t bytes, uint8_t **map, size_t *maplen)
{
	size_t len = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uint8_t *p, *base;

	if (len < bytes)
		return NULL;
	p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	base = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
	madvise(base, len, MADV_HUGEPAGE);	/* EINVAL where THP is not built in: 4 KB pages then */
#endif
	*map = p;
	*maplen = len + HUGE_PAGE;
	return base;
}

/* A reservation of BYTES for this thread's arrays, until scratch_close; 0, or -1 (then none). */
int scratch_open(struct scratch *s, size_t bytes)
{
	memset(s, 0, sizeof(*s));
	if (!(s->base = huge_pages(bytes, &s->map, &s->maplen)))
		return -1;
	s->next = s->populated = s->base;
	s->end = s->base + bytes;
	scratch_of_thread = s;
	return 0;
}

void scratch_close(struct scratch *s)
{
	if (scratch_of_thread == s)
		scratch_of_thread = NULL;
	if (s->map)
		munmap(s->map, s->maplen);
	s->map = NULL;
}

static int inside(const struct scratch *s, const void *p)
{
	return s && (const uint8_t *)p >= s->base && (const uint8_t *)p < s->end;
}

/*
 * N bytes for an array about to be filled, its pages present (the callers' arrays are filled
 * at once): from the scratch, whose pages are made present a huge page at a time as the arrays
 * first reach them (one madvise for a vmlinux's side, not one an array), else PyMem's.
 */
void *scratch_malloc(size_t n)
{
	struct scratch *s = scratch_of_thread;
	size_t room = n ? (n + ALIGN - 1) & ~(size_t)(ALIGN - 1) : ALIGN;
	uint8_t *to;

	if (!s || room < n || room > (size_t)(s->end - s->next))
		return prefaulted(PyMem_RawMalloc(n), n);
	s->last = s->next;
	s->next += room;
	s->live++;
	if (s->next > s->populated) {
		to = s->base + ((size_t)(s->next - s->base) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
		to = to < s->end ? to : s->end;
		prefaulted(s->populated, (size_t)(to - s->populated));
		s->populated = to;
	}
	return s->last;
}

void *scratch_calloc(size_t n, size_t size)
{
	void *p;

	if (!scratch_of_thread)
		return prefaulted(PyMem_RawCalloc(n, size), n * size);
	if (size && n > SIZE_MAX / size)
		return NULL;
	if ((p = scratch_malloc(n * size)))
		memset(p, 0, n * size);	/* rewound pages hold the last member's arrays */
	return p;
}

void scratch_free(void *p)
{
	struct scratch *s = scratch_of_thread;

	if (!p)
		return;
	if (!inside(s, p)) {
		PyMem_RawFree(p);
		return;
	}
	if (--s->live == 0)
		s->next = s->base;
	else if (p == s->last)	/* a sort's buffer, freed before the next array: its room serves again */
		s->next = s->last;
	s->last = NULL;
}
