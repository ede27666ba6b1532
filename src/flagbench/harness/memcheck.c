/* flagbench memcheck: the exhaustive correctness check of one memcpy, memset or
 * memmove implementation, run before any timing (after ARM optimized-routines and
 * glibc's string tests).
 *
 * Build: cc -DFB_FN=memcpy_template [-DFB_KIND_MEMSET | -DFB_KIND_MEMMOVE] -c memcheck.c
 *        or -DFB_LIBC for the C library's own function of that kind.
 * The function is called through a volatile pointer: never inlined, never known.
 *
 * What is checked, for every case:
 *  - every byte of a window from GUARD bytes before the destination to GUARD bytes
 *    after it: inside, the expected byte; outside, the sentinel that was there.
 *    Before each call the whole window is rewritten: inside with sentinels too (an
 *    implementation that skips a byte cannot pass on a previous case's data);
 *    sentinels differ from the byte an overrun would most likely write (the next
 *    source byte, or memset's value) and from 0;
 *  - the return value (dst) and, for memcpy/memmove, that the source is unchanged.
 * Cases:
 *  - lengths 0..99: every dst alignment 0..31 x every src alignment 0..31;
 *  - lengths 100 and 2^k-1, 2^k, 2^k+1 for k = 7..16 (up to 64 KiB + 1): the
 *    (dst, src) alignment pairs with both < 8 (every relative misalignment and head
 *    length of an 8-byte word), or dst == src, or either 0 (every head length and
 *    every relative misalignment mod 32): 148 of the 1024 pairs. All 1024 would
 *    make the check of a byte-loop copy take about a minute under qemu;
 *  - memset: the same lengths, dst alignment only, fill value 0xC3 over a window
 *    prefilled with bytes that are never 0xC3 or 0;
 *  - memmove: the memcpy cases (no overlap), then overlapping copies both ways:
 *    dst - src = +-1..+-16, +-len/2, +-(len-1) for lengths 0..99 at src alignment
 *    0..31, and +-1, +-7, +-8, +-len/2, +-(len-1) for a few lengths up to 4097.
 * Output: "cases N" when all pass. The first failure prints one line
 *   FAIL <name>: dst_align D src_align S len L: byte B expected 0xEE got 0xGG
 * (B is the offset from dst, negative before it; overlaps add "overlap dst-src=+K";
 * a wrong return value says "returned dst+X") and exits with status 1.
 */
#define FB_MEMORY_FUNCTION 1
#include "harness.h"      /* fn_t, FB_FN and FN_NAME from the build flags */

fn_t FB_FN;
static fn_t *volatile impl = FB_FN;

#define GUARD 64                  /* bytes checked on each side of the destination */
#define PAD 256                   /* room for GUARD, alignments and overlap deltas */
#define SMALL 100                 /* lengths 0..SMALL-1: all 32 x 32 alignments */
#define MAXLEN 65537
#define AREA (MAXLEN + 2 * PAD + 64)
#define FILL 0xC3
#define MOVE_BASE (4097 + GUARD + 64) /* memmove overlaps: dst may lie up to 4096 before src */

static unsigned char src_area[AREA] __attribute__((aligned(64)));
static unsigned char dst_area[AREA] __attribute__((aligned(64)));
static uint64_t n_cases;

/* -- one output line, built without stdio (the runtime may be freestanding) -- */
static char line[256];
static size_t used;

static void put_s(const char *s)
{
	while (*s && used < sizeof line - 2)
		line[used++] = *s++;
}

static void put_u(uint64_t v)
{
	char digits[24];
	int n = 0;
	do digits[n++] = (char)('0' + v % 10); while ((v /= 10));
	while (n && used < sizeof line - 2)
		line[used++] = digits[--n];
}

static void put_i(int64_t v)
{
	if (v < 0) {
		put_s("-");
		put_u((uint64_t)-v);
	} else {
		put_u((uint64_t)v);
	}
}

static void put_x(unsigned v)
{
	static const char hex[] = "0123456789abcdef";
	put_s("0x");
	if (used < sizeof line - 4) {
		line[used++] = hex[(v >> 4) & 15];
		line[used++] = hex[v & 15];
	}
}

static void end_line(void)
{
	line[used++] = '\n';
	line[used] = 0;
	fb_puts(line);
	used = 0;
}

/* -- patterns ---------------------------------------------------------------- */
static unsigned char pattern(size_t i)
{
	uint32_t x = (uint32_t)i * 0x9E3779B1u;
	return (unsigned char)((x >> 24) ^ (x >> 11));
}

/* What sits at a destination byte that must not be written: never `avoid`, never 0. */
static unsigned char sentinel(unsigned char avoid)
{
	unsigned char s = (unsigned char)~avoid;
	return s ? s : 0x55;
}

static void fail_head(int64_t delta, unsigned dalign, unsigned salign, size_t len)
{
	put_s("FAIL ");
	put_s(FN_NAME);
	put_s(": ");
	if (delta) {
		put_s("overlap dst-src=");
		if (delta > 0)
			put_s("+");
		put_i(delta);
		put_s(" ");
	}
	put_s("dst_align ");
	put_u(dalign);
#ifndef FB_KIND_MEMSET
	put_s(" src_align ");
	put_u(salign);
#else
	(void)salign;
#endif
	put_s(" len ");
	put_u(len);
	put_s(": ");
}

static int fail_byte(int64_t delta, unsigned dalign, unsigned salign, size_t len, int64_t offset,
		     unsigned expected, unsigned got)
{
	fail_head(delta, dalign, salign, len);
	put_s("byte ");
	put_i(offset);
	put_s(" expected ");
	put_x(expected);
	put_s(" got ");
	put_x(got);
	end_line();
	return 0;
}

static int check_return(void *ret, void *dst, int64_t delta, unsigned dalign, unsigned salign, size_t len)
{
	if (ret == dst)
		return 1;
	fail_head(delta, dalign, salign, len);
	put_s("returned dst");
	if ((char *)ret >= (char *)dst)
		put_s("+");
	put_i((int64_t)((char *)ret - (char *)dst));
	put_s(" (expected dst)");
	end_line();
	return 0;
}

#ifndef FB_KIND_MEMSET
/* memcpy (and memmove without overlap): dst_area[PAD+d ..] <- src_area[PAD+s ..] */
static int copy_case(unsigned d, unsigned s, size_t len)
{
	unsigned char *dst = dst_area + PAD + d, *src = src_area + PAD + s;
	int64_t p, lo = -GUARD, hi = (int64_t)len + GUARD;

	for (p = lo; p < hi; p++)
		dst[p] = sentinel(src[p]);
	n_cases++;
	if (!check_return(impl(dst, src, len), dst, 0, d, s, len))
		return 0;
	for (p = lo; p < hi; p++) {
		unsigned want = (p >= 0 && p < (int64_t)len) ? src[p] : sentinel(src[p]);
		if (dst[p] != want)
			return fail_byte(0, d, s, len, p, want, dst[p]);
	}
	return 1;
}

/* The source bytes a copy of up to `len` at this alignment could have touched. */
static int check_source(unsigned d, unsigned s, size_t len)
{
	for (size_t i = PAD + s - GUARD; i < PAD + s + len + GUARD; i++)
		if (src_area[i] != pattern(i)) {
			fail_head(0, d, s, len);
			put_s("wrote into the source at byte ");
			put_i((int64_t)i - PAD - (int64_t)s);
			end_line();
			return 0;
		}
	return 1;
}
#define ONE_CASE(d, s, len) copy_case(d, s, len)
#else
static int set_case(unsigned d, unsigned s, size_t len)
{
	unsigned char *dst = dst_area + PAD + d;
	int64_t p, lo = -GUARD, hi = (int64_t)len + GUARD;

	for (p = lo; p < hi; p++)
		dst[p] = pattern((size_t)(p + PAD + d)) == FILL ? 0x3C : sentinel(pattern((size_t)(p + PAD + d)));
	n_cases++;
	if (!check_return(impl(dst, FILL, len), dst, 0, d, s, len))
		return 0;
	for (p = lo; p < hi; p++) {
		unsigned before = pattern((size_t)(p + PAD + d)) == FILL ? 0x3C : sentinel(pattern((size_t)(p + PAD + d)));
		unsigned want = (p >= 0 && p < (int64_t)len) ? FILL : before;
		if (dst[p] != want)
			return fail_byte(0, d, s, len, p, want, dst[p]);
	}
	return 1;
}
#define ONE_CASE(d, s, len) set_case(d, s, len)
#endif

#ifdef FB_KIND_MEMMOVE
/* Overlapping move inside dst_area: src at MOVE_BASE+s, dst = src + delta. */
static int move_case(unsigned s, int64_t delta, size_t len)
{
	unsigned char *src = dst_area + MOVE_BASE + s, *dst = src + delta;
	int64_t base = MOVE_BASE + (int64_t)s, lo = (delta < 0 ? delta : 0) - GUARD;
	int64_t hi = (delta > 0 ? delta : 0) + (int64_t)len + GUARD;
	unsigned dalign = (unsigned)((s + delta) & 31);

	for (int64_t p = lo; p < hi; p++)
		src[p] = pattern((size_t)(base + p));
	n_cases++;
	if (!check_return(impl(dst, src, len), dst, delta, dalign, s, len))
		return 0;
	for (int64_t p = lo; p < hi; p++) {    /* p: offset from src */
		int64_t k = p - delta;          /* offset from dst */
		unsigned want = (k >= 0 && k < (int64_t)len) ? pattern((size_t)(base + k))
							       : pattern((size_t)(base + p));
		if (src[p] != want)
			return fail_byte(delta, dalign, s, len, k, want, src[p]);
	}
	return 1;
}

static int overlap_cases(void)
{
	static const unsigned big[] = {100, 255, 256, 257, 1000, 4096, 4097};
	static const unsigned big_salign[] = {0, 1, 3, 7};
	for (unsigned s = 0; s < 32; s++)
		for (size_t len = 0; len < SMALL; len++) {
			int64_t deltas[20] = {(int64_t)len / 2, (int64_t)len - 1};
			for (int i = 0; i < 16; i++)
				deltas[2 + i] = i + 1;
			for (int i = 0; i < 18; i++)
				for (int sign = -1; sign <= 1; sign += 2)
					if (deltas[i] > 0 && !move_case(s, sign * deltas[i], len))
						return 0;
		}
	for (unsigned i = 0; i < sizeof big / sizeof big[0]; i++)
		for (unsigned j = 0; j < sizeof big_salign / sizeof big_salign[0]; j++) {
			int64_t len = big[i], deltas[] = {1, 7, 8, len / 2, len - 1};
			for (int k = 0; k < 5; k++)
				for (int sign = -1; sign <= 1; sign += 2)
					if (!move_case(big_salign[j], sign * deltas[k], (size_t)len))
						return 0;
		}
	return 1;
}
#endif

static int small_lengths(void)
{
	for (unsigned d = 0; d < 32; d++) {
#ifdef FB_KIND_MEMSET
		for (unsigned s = 0; s < 1; s++) {
#else
		for (unsigned s = 0; s < 32; s++) {
#endif
			for (size_t len = 0; len < SMALL; len++)
				if (!ONE_CASE(d, s, len))
					return 0;
#ifndef FB_KIND_MEMSET
			if (!check_source(d, s, SMALL - 1))
				return 0;
#endif
		}
	}
	return 1;
}

static int large_pair(unsigned d, unsigned s)
{
#ifdef FB_KIND_MEMSET
	if (s)
		return 0;
#endif
	return (d < 8 && s < 8) || d == s || d == 0 || s == 0;
}

static int large_lengths(void)
{
	size_t lens[1 + 3 * 10];
	unsigned n = 0;
	lens[n++] = 100;
	for (unsigned k = 7; k <= 16; k++) {
		lens[n++] = ((size_t)1 << k) - 1;
		lens[n++] = (size_t)1 << k;
		lens[n++] = ((size_t)1 << k) + 1;
	}
	for (unsigned d = 0; d < 32; d++)
		for (unsigned s = 0; s < 32; s++) {
			if (!large_pair(d, s))
				continue;
			for (unsigned i = 0; i < n; i++)
				if (!ONE_CASE(d, s, lens[i]))
					return 0;
#ifndef FB_KIND_MEMSET
			if (!check_source(d, s, MAXLEN))
				return 0;
#endif
		}
	return 1;
}

int main(void)
{
	for (size_t i = 0; i < AREA; i++)
		src_area[i] = pattern(i);
	if (!small_lengths() || !large_lengths())
		return 1;
#ifdef FB_KIND_MEMMOVE
	if (!overlap_cases())
		return 1;
#endif
	fb_print("cases", n_cases);
	return 0;
}
