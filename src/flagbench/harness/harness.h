/* What the flagbench harnesses share: parse_u64 for their arguments (micro.c,
 * memsweep.c) and, for the two that take a memory function (memcheck.c,
 * memsweep.c, which define FB_MEMORY_FUNCTION before including this), the choice
 * of the function under test from the build flags:
 *   -DFB_KIND_MEMSET | -DFB_KIND_MEMMOVE   its kind (default memcpy), hence fn_t;
 *   -DFB_FN=name | -DFB_LIBC               which one: FB_FN, and FN_NAME to print.
 * Uses only the harness runtime (fbrt.h): it may be freestanding. */
#ifndef FB_HARNESS_H
#define FB_HARNESS_H

#include "fbrt.h"

/* Decimal digits only (no sign, no space, no overflow); else 0, a usage error. */
static inline int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (~0ull - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 1;
}

#ifdef FB_MEMORY_FUNCTION
#if defined(FB_KIND_MEMSET)
typedef void *fn_t(void *, int, size_t);
#else /* memcpy, memmove */
typedef void *fn_t(void *, const void *, size_t);
#endif

#ifdef FB_LIBC
#if defined(FB_KIND_MEMSET)
#define FB_FN memset
#elif defined(FB_KIND_MEMMOVE)
#define FB_FN memmove
#else
#define FB_FN memcpy
#endif
#define FN_NAME "libc"
#else
#ifndef FB_FN
#error "compile with -DFB_FN=function_name (or -DFB_LIBC)"
#endif
#define FB_STR_(x) #x
#define FB_STR(x) FB_STR_(x)
#define FN_NAME FB_STR(FB_FN)
#endif
#endif /* FB_MEMORY_FUNCTION */

#endif
