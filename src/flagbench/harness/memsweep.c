/* flagbench memsweep: speed (natively) or executed instructions (under callgrind or
 * qemu + plugin) of one memcpy, memset or memmove implementation at given points
 * (size, dst alignment, src alignment). Run memcheck first: this only measures.
 *
 * Build: as memcheck.c (-DFB_FN=name [-DFB_KIND_MEMSET | -DFB_KIND_MEMMOVE] or -DFB_LIBC).
 *
 *   memsweep t SIZE DALIGN SALIGN REPS [SIZE DALIGN SALIGN REPS ...]
 *       timed: per point a warm-up batch of REPS/16 + 1 calls, then a timed batch of
 *       REPS calls. REPS 0 calibrates: the batch doubles from 1 call until it takes
 *       >= FB_TARGET_NS (10 ms) and that last batch is reported.
 *   memsweep c SIZE DALIGN SALIGN REPS
 *       counted: REPS calls, no clock read, no output. Give every number zero-padded
 *       to a fixed width; then runs with REPS and 2*REPS differ in instruction count by
 *       exactly REPS calls plus REPS turns of the harness loop (a handful of
 *       instructions a call: the same for every implementation).
 * Output (timed), integers only, one line per value:
 *   ns.size<SIZE>.dalign<D>.salign<S> <nanoseconds of the batch>
 *   reps.size<SIZE>.dalign<D>.salign<S> <calls in the batch>
 * (memset: no ".salign<S>"). MB/s = SIZE * reps * 1000 / ns, computed by the caller.
 * Bad arguments: a line "usage: ..." and exit status 2.
 */
#define FB_MEMORY_FUNCTION 1
#include "harness.h"      /* fn_t and FB_FN from the build flags; parse_u64 */

#ifndef FB_TARGET_NS
#define FB_TARGET_NS 10000000ull
#endif
#ifndef FB_MAX_SIZE
#define FB_MAX_SIZE (16u << 20)
#endif
#define MAX_REPS (1ull << 32)

fn_t FB_FN;
static fn_t *volatile impl = FB_FN;

static unsigned char src_buf[FB_MAX_SIZE + 64] __attribute__((aligned(64)));
static unsigned char dst_buf[FB_MAX_SIZE + 64] __attribute__((aligned(64)));

static void batch(unsigned char *dst, const unsigned char *src, size_t size, uint64_t reps)
{
	for (uint64_t i = 0; i < reps; i++) {
#if defined(FB_KIND_MEMSET)
		(void)src;
		impl(dst, 0x5A, size);
#else
		impl(dst, src, size);
#endif
	}
}

static uint64_t timed_batch(unsigned char *dst, const unsigned char *src, size_t size, uint64_t reps)
{
	uint64_t start = fb_now_ns();
	batch(dst, src, size, reps);
	return fb_now_ns() - start;
}

/* "<what>.size<S>.dalign<D>[.salign<A>]" without stdio */
static void print_point(const char *what, uint64_t size, uint64_t d, uint64_t s, uint64_t value)
{
	char key[96];
	size_t n = 0;
	const char *parts[3] = {".size", ".dalign", ".salign"};
	uint64_t nums[3] = {size, d, s};
	int n_parts = 3;
#if defined(FB_KIND_MEMSET)
	n_parts = 2;
#endif
	while (*what)
		key[n++] = *what++;
	for (int i = 0; i < n_parts; i++) {
		char digits[24];
		int k = 0;
		for (const char *p = parts[i]; *p; p++)
			key[n++] = *p;
		do digits[k++] = (char)('0' + nums[i] % 10); while ((nums[i] /= 10));
		while (k)
			key[n++] = digits[--k];
	}
	key[n] = 0;
	fb_print(key, value);
}

static int usage(void)
{
	fb_puts("usage: memsweep t|c SIZE DALIGN SALIGN REPS [SIZE DALIGN SALIGN REPS ...] "
		"(alignments 0..63, SIZE at most FB_MAX_SIZE)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 6 || (argc - 2) % 4 || argv[1][1] || (argv[1][0] != 't' && argv[1][0] != 'c'))
		return usage();
	int counted = argv[1][0] == 'c';
	if (counted && argc != 6)
		return usage();
	for (int i = 2; i < argc; i += 4) {
		uint64_t size, d, s, reps;
		if (!parse_u64(argv[i], &size) || !parse_u64(argv[i + 1], &d) || !parse_u64(argv[i + 2], &s) ||
		    !parse_u64(argv[i + 3], &reps) || size > FB_MAX_SIZE || d > 63 || s > 63)
			return usage();
		unsigned char *dst = dst_buf + d, *src = src_buf + s;
		for (size_t k = 0; k < size; k++) {   /* touch every page before measuring */
			src[k] = (unsigned char)(k * 7 + 1);
			dst[k] = 0;
		}
		if (counted) {
			batch(dst, src, size, reps);
			return 0;
		}
		uint64_t ns;
		if (reps == 0) {
			for (reps = 1;; reps *= 2) {
				ns = timed_batch(dst, src, size, reps);
				if (ns >= FB_TARGET_NS || reps >= MAX_REPS)
					break;
			}
		} else {
			batch(dst, src, size, reps / 16 + 1);
			ns = timed_batch(dst, src, size, reps);
		}
		print_point("ns", size, d, s, ns);
		print_point("reps", size, d, s, reps);
	}
	return 0;
}
