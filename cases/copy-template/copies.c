/* memcpy implementations compared by the copy-template case (seed 004): the old
 * word copy the thread replaced (the baseline), the template, and others for scale.
 * Build with -fno-builtin (and gcc's -fno-tree-loop-distribute-patterns) so
 * the compiler does not turn these loops back into calls to memcpy. */
#include <stddef.h>
#include <stdint.h>

typedef uint64_t __attribute__((may_alias)) word_t;
typedef uint64_t __attribute__((may_alias, aligned(1))) uword_t;
#define WORD sizeof(word_t)

/* The copy the thread replaced (arch/arm/lib/memcpy.S before the template): a
 * machine-word copy that aligns the destination byte by byte, then copies blocks
 * of four words when the source is aligned too, and otherwise reads aligned source
 * words and merges each pair with shifts (the old code's "src not aligned" paths,
 * one per misalignment); the tail goes byte by byte. Little-endian merge. */
void *memcpy_old(void *dst, const void *src, size_t n)
{
	typedef unsigned long __attribute__((may_alias)) ulong;
	const size_t w = sizeof(ulong);
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n && ((uintptr_t)d & (w - 1))) {
		*d++ = *s++;
		n--;
	}
	size_t off = (uintptr_t)s & (w - 1);
	if (off == 0) {
		for (; n >= 4 * w; n -= 4 * w, d += 4 * w, s += 4 * w) {
			ulong a = ((const ulong *)s)[0], b = ((const ulong *)s)[1];
			ulong c = ((const ulong *)s)[2], e = ((const ulong *)s)[3];
			((ulong *)d)[0] = a; ((ulong *)d)[1] = b;
			((ulong *)d)[2] = c; ((ulong *)d)[3] = e;
		}
		for (; n >= w; n -= w, d += w, s += w)
			*(ulong *)d = *(const ulong *)s;
	} else if (n >= 2 * w) {
		/* whole aligned source words only: never read a word past the source's end */
		const ulong *as = (const ulong *)(s - off);
		unsigned lo = 8 * off, hi = 8 * (w - off);
		ulong cur = *as++;
		for (; n >= 2 * w; n -= w, d += w, s += w) {
			ulong next = *as++;
			*(ulong *)d = (cur >> lo) | (next << hi);
			cur = next;
		}
	}
	while (n--)
		*d++ = *s++;
	return dst;
}

/* The simplest correct copy: one byte at a time. */
void *memcpy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n--)
		*d++ = *s++;
	return dst;
}

/* Align the destination, then copy words; the source may stay unaligned. */
void *memcpy_words(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n && ((uintptr_t)d & (WORD - 1))) {
		*d++ = *s++;
		n--;
	}
	for (; n >= WORD; n -= WORD, d += WORD, s += WORD)
		*(word_t *)d = *(const uword_t *)s;
	while (n--)
		*d++ = *s++;
	return dst;
}

/* Four words per iteration, no alignment fix-up. */
void *memcpy_unrolled(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (; n >= 4 * WORD; n -= 4 * WORD, d += 4 * WORD, s += 4 * WORD) {
		uint64_t a = ((const uword_t *)s)[0], b = ((const uword_t *)s)[1];
		uint64_t c = ((const uword_t *)s)[2], e = ((const uword_t *)s)[3];
		((uword_t *)d)[0] = a; ((uword_t *)d)[1] = b;
		((uword_t *)d)[2] = c; ((uword_t *)d)[3] = e;
	}
	for (; n >= WORD; n -= WORD, d += WORD, s += WORD)
		*(uword_t *)d = *(const uword_t *)s;
	while (n--)
		*d++ = *s++;
	return dst;
}

/* The template of the seed's shape: a short-copy path for small sizes, then
 * head (align dst), body (32 bytes an iteration) and tail (<32 bytes, by word
 * then byte). One core shared by every user, as copy_template.S is. */
static inline __attribute__((always_inline))
void copy_core(unsigned char *d, const unsigned char *s, size_t n)
{
	if (n < 16) {			/* entry cost matters most for small copies */
		if (n & 8) { *(uword_t *)d = *(const uword_t *)s; d += 8; s += 8; }
		if (n & 4) { *(uint32_t *)d = *(const uint32_t *)s; d += 4; s += 4; }
		if (n & 2) { *(uint16_t *)d = *(const uint16_t *)s; d += 2; s += 2; }
		if (n & 1) *d = *s;
		return;
	}
	size_t head = (WORD - ((uintptr_t)d & (WORD - 1))) & (WORD - 1);
	*(uword_t *)d = *(const uword_t *)s;	/* head: one unaligned word covers it */
	d += head; s += head; n -= head;
	for (; n >= 32; n -= 32, d += 32, s += 32) {
		uint64_t a = ((const uword_t *)s)[0], b = ((const uword_t *)s)[1];
		uint64_t c = ((const uword_t *)s)[2], e = ((const uword_t *)s)[3];
		((word_t *)d)[0] = a; ((word_t *)d)[1] = b;
		((word_t *)d)[2] = c; ((word_t *)d)[3] = e;
	}
	for (; n >= WORD; n -= WORD, d += WORD, s += WORD)
		*(word_t *)d = *(const uword_t *)s;
	if (n)				/* tail: one unaligned word ending at the end */
		*(uword_t *)(d + n - WORD) = *(const uword_t *)(s + n - WORD);
}

void *memcpy_template(void *dst, const void *src, size_t n)
{
	copy_core(dst, src, n);
	return dst;
}

#if defined(__x86_64__)
void *memcpy_rep_movsb(void *dst, const void *src, size_t n)
{
	void *ret = dst;
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
	return ret;
}

void *memcpy_rep_movsq(void *dst, const void *src, size_t n)
{
	void *ret = dst;
	size_t q = n >> 3, r = n & 7;
	__asm__ volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(q) : : "memory");
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(r) : : "memory");
	return ret;
}
#endif
