/* flagbench micro harness: calls the experiment's `uint64_t FB_FN(uint64_t n)`,
 * which does n iterations of the work, and prints "key value" lines.
 *
 * Build: cc -DFB_FN=assign_loop -c micro.c, linked with the variant's objects and
 * the harness runtime (fbrt.h). FB_FN lives in another object, so the call is
 * never inlined and the loop keeps the variant's code generation.
 *
 *   micro          calibrate: n doubles from 1 until one call takes >= FB_TARGET_NS
 *                  (20 ms); prints "iters N" and "ns T" of that last call
 *   micro t N      timed: a warm-up call with N/16 + 1, then one timed call with N;
 *                  prints "iters N" and "ns T"
 *   micro c N      counted (under callgrind or qemu + plugin): one call with N, no
 *                  clock read, no output. Give N zero-padded to a fixed width
 *                  ("c 00001000", "c 00002000"): argv length and digit parsing are
 *                  then the same, so the two instruction counts differ by exactly
 *                  the 1000 extra iterations of FB_FN.
 *   -DFB_ITERS=N   with no argument: counted mode with N (runtimes without argv).
 * Only integers are printed; the Python side divides.
 */
#include "harness.h"      /* parse_u64 */

#ifndef FB_FN
#error "compile with -DFB_FN=name_of_the_loop_function"
#endif
#ifndef FB_TARGET_NS
#define FB_TARGET_NS 20000000ull
#endif
#define FB_MAX_ITERS (1ull << 40)

uint64_t FB_FN(uint64_t n);

volatile uint64_t fb_sink; /* the loop's result goes somewhere the compiler must keep */

static uint64_t timed_call(uint64_t n)
{
	uint64_t start = fb_now_ns();
	fb_sink = FB_FN(n);
	return fb_now_ns() - start;
}

static int usage(void)
{
	fb_puts("usage: micro [t N | c N]\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t n = 1, ns;

	if (argc < 2) {
#ifdef FB_ITERS
		fb_sink = FB_FN(FB_ITERS);
		return 0;
#else
		for (;;) {
			ns = timed_call(n);
			if (ns >= FB_TARGET_NS || n >= FB_MAX_ITERS)
				break;
			n *= 2;
		}
		fb_print("iters", n);
		fb_print("ns", ns);
		return 0;
#endif
	}
	if (argc != 3 || argv[1][1] || !parse_u64(argv[2], &n))
		return usage();
	switch (argv[1][0]) {
	case 'c':
		fb_sink = FB_FN(n);
		return 0;
	case 't':
		fb_sink = FB_FN(n / 16 + 1); /* caches, branch predictors, lazy page mapping */
		ns = timed_call(n);
		fb_print("iters", n);
		fb_print("ns", ns);
		return 0;
	}
	return usage();
}
