/* Test stand-in for the freestanding harness runtime on loongarch64: _start,
 * raw syscalls, and the string functions the compiler may call. */
#include "fbrt.h"

static long sys3(long n, long a, long b, long c)
{
	register long a0 __asm__("$a0") = a;
	register long a1 __asm__("$a1") = b;
	register long a2 __asm__("$a2") = c;
	register long a7 __asm__("$a7") = n;
	__asm__ volatile("syscall 0" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory", "$t0", "$t1",
			 "$t2", "$t3", "$t4", "$t5", "$t6", "$t7", "$t8");
	return a0;
}

void fb_exit(int code)
{
	sys3(94, code, 0, 0); /* exit_group */
	__builtin_unreachable();
}

uint64_t fb_now_ns(void)
{
	long ts[2];
	sys3(113, 1, (long)ts, 0); /* clock_gettime(CLOCK_MONOTONIC) */
	return (uint64_t)ts[0] * 1000000000u + (uint64_t)ts[1];
}

void fb_puts(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	sys3(64, 1, (long)s, (long)n);
}

void fb_print(const char *key, uint64_t value)
{
	char buf[96], digits[24];
	size_t n = 0, d = 0;
	while (*key && n < 64)
		buf[n++] = *key++;
	buf[n++] = ' ';
	do digits[d++] = (char)('0' + value % 10); while ((value /= 10));
	while (d)
		buf[n++] = digits[--d];
	buf[n++] = '\n';
	sys3(64, 1, (long)buf, (long)n);
}

void *memcpy(void *d, const void *s, size_t n)
{
	unsigned char *dp = d;
	const unsigned char *sp = s;
	while (n--) *dp++ = *sp++;
	return d;
}
void *memset(void *d, int c, size_t n)
{
	unsigned char *dp = d;
	while (n--) *dp++ = (unsigned char)c;
	return d;
}
void *memmove(void *d, const void *s, size_t n)
{
	unsigned char *dp = d;
	const unsigned char *sp = s;
	if (dp < sp) while (n--) *dp++ = *sp++;
	else while (n--) dp[n] = sp[n];
	return d;
}
int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;
	for (; n; n--, x++, y++)
		if (*x != *y) return *x - *y;
	return 0;
}

int main(int argc, char **argv);
__attribute__((used)) void fb_cstart(long *sp)
{
	fb_exit(main((int)sp[0], (char **)(sp + 1)));
}
__asm__("  .text\n  .globl _start\n  .type _start,@function\n_start:\n"
	"  move $a0, $sp\n  bstrins.d $sp, $zero, 3, 0\n  bl fb_cstart\n");
