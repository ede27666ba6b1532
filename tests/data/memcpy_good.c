/* Correct implementations for the memcheck tests: word copies with alignment
 * fix-up (so the check exercises head, body and tail), and a memmove that picks
 * its direction. Build with -fno-builtin (gcc: -fno-tree-loop-distribute-patterns). */
#include <stddef.h>
#include <stdint.h>

typedef uint64_t __attribute__((may_alias, aligned(1))) uword_t;

void *good_memcpy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n && ((uintptr_t)d & 7)) {
		*d++ = *s++;
		n--;
	}
	for (; n >= 8; n -= 8, d += 8, s += 8)
		*(uword_t *)d = *(const uword_t *)s;
	while (n--)
		*d++ = *s++;
	return dst;
}

void *good_memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;
	uint64_t v = (unsigned char)c * 0x0101010101010101ull;
	while (n && ((uintptr_t)d & 7)) {
		*d++ = (unsigned char)c;
		n--;
	}
	for (; n >= 8; n -= 8, d += 8)
		*(uword_t *)d = v;
	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

void *good_memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (d <= s || d >= s + n)
		return good_memcpy(dst, src, n);
	while (n--)
		d[n] = s[n];
	return dst;
}
