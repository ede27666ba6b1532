/* Deliberately broken implementations: memcheck must catch each with the case and
 * the byte given in the comment (the first case it checks that goes wrong).
 * Build with -fno-builtin (gcc: -fno-tree-loop-distribute-patterns). */
#include <stddef.h>
#include <stdint.h>

static void bytes(unsigned char *d, const unsigned char *s, size_t n)
{
	while (n--)
		*d++ = *s++;
}

/* Copies one byte too many: dst_align 0 src_align 0 len 0, byte 0. */
void *memcpy_overrun(void *dst, const void *src, size_t n)
{
	bytes(dst, src, n + 1);
	return dst;
}

/* Drops the last byte when dst is 5 and src 17 bytes past a 32-byte boundary and
 * n >= 8: dst_align 5 src_align 17 len 8, byte 7. */
void *memcpy_one_alignment(void *dst, const void *src, size_t n)
{
	if (((uintptr_t)dst & 31) == 5 && ((uintptr_t)src & 31) == 17 && n >= 8)
		n--;
	bytes(dst, src, n);
	return dst;
}

/* A head fix-up that writes the byte before dst for n > 40: dst_align 0 src_align 0
 * len 41, byte -1. */
void *memcpy_stray_before(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	if (n > 40)
		d[-1] = 0;
	bytes(dst, src, n);
	return dst;
}

/* Returns the end of the copy, not dst: dst_align 0 src_align 0 len 1. */
void *memcpy_bad_return(void *dst, const void *src, size_t n)
{
	bytes(dst, src, n);
	return (unsigned char *)dst + n;
}

/* memmove that always copies forwards: overlap dst-src=+1 dst_align 1 src_align 0
 * len 2, byte 1. */
void *memmove_forward(void *dst, const void *src, size_t n)
{
	bytes(dst, src, n);
	return dst;
}

/* memset that misses the last byte when dst is 3 past an 8-byte boundary and
 * n >= 16: dst_align 3 len 16, byte 15. */
void *memset_short(void *dst, int c, size_t n)
{
	unsigned char *d = dst;
	if (((uintptr_t)d & 7) == 3 && n >= 16)
		n--;
	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}
