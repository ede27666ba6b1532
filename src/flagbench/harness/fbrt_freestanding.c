/* flagbench harness runtime without a C library: _start, raw Linux system calls,
 * and memcpy/memmove/memset/memcmp/bcmp (compilers emit calls to them even in
 * freestanding code). Used on loongarch64, which has no cross libc in Debian 12;
 * the other 64-bit targets are here too so it can be tested natively.
 *
 * Build with -ffreestanding -fno-builtin (else the byte loops below may be turned
 * into calls to themselves) and link with -nostdlib -static. */
#include "fbrt.h"

#if defined(__x86_64__)
#define NR_WRITE 1
#define NR_CLOCK_GETTIME 228
#define NR_EXIT_GROUP 231
#else /* the generic syscall table: aarch64, riscv64, loongarch64 */
#define NR_WRITE 64
#define NR_CLOCK_GETTIME 113
#define NR_EXIT_GROUP 94
#endif

static long sys3(long n, long a, long b, long c)
{
#if defined(__loongarch__)
	register long a0 __asm__("$a0") = a;
	register long a1 __asm__("$a1") = b;
	register long a2 __asm__("$a2") = c;
	register long a7 __asm__("$a7") = n;
	__asm__ volatile("syscall 0" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7)
			 : "memory", "$t0", "$t1", "$t2", "$t3", "$t4", "$t5", "$t6", "$t7", "$t8");
	return a0;
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x8 __asm__("x8") = n;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
	return x0;
#elif defined(__riscv) && __riscv_xlen == 64
	register long a0 __asm__("a0") = a;
	register long a1 __asm__("a1") = b;
	register long a2 __asm__("a2") = c;
	register long a7 __asm__("a7") = n;
	__asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory");
	return a0;
#elif defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
#else
#error "fbrt_freestanding.c: no system calls for this architecture (use fbrt_libc.c)"
#endif
}

static void write_all(const char *p, size_t n)
{
	while (n) {
		long done = sys3(NR_WRITE, 1, (long)p, (long)n);
		if (done <= 0)
			return;
		p += done;
		n -= (size_t)done;
	}
}

void fb_exit(int code)
{
	for (;;)
		sys3(NR_EXIT_GROUP, code, 0, 0);
}

uint64_t fb_now_ns(void)
{
	long ts[2] = {0, 0};   /* struct timespec on a 64-bit target */

	sys3(NR_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, (long)ts, 0);
	return (uint64_t)ts[0] * 1000000000u + (uint64_t)ts[1];
}

void fb_puts(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	write_all(s, n);
}

void fb_print(const char *key, uint64_t value)
{
	char buf[128], digits[24];
	size_t n = 0, d = 0;

	while (*key && n < sizeof(buf) - sizeof(digits) - 2)
		buf[n++] = *key++;
	buf[n++] = ' ';
	do
		digits[d++] = (char)('0' + value % 10);
	while ((value /= 10));
	while (d)
		buf[n++] = digits[--d];
	buf[n++] = '\n';
	write_all(buf, n);
}

void *memcpy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (d < s)
		while (n--)
			*d++ = *s++;
	else
		while (n--)
			d[n] = s[n];
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

/* clang turns memcmp(...) == 0 into a call to bcmp. */
int bcmp(const void *a, const void *b, size_t n)
{
	return memcmp(a, b, n);
}

int main(int argc, char **argv);

/* sp points at argc, then argv[], NULL, envp[], NULL, auxv. */
__attribute__((used, noreturn)) void fb_cstart(long *sp)
{
	fb_exit(main((int)sp[0], (char **)(sp + 1)));
}

#if defined(__loongarch__)
__asm__(".text\n.globl _start\n.type _start,@function\n_start:\n"
	"  move $a0, $sp\n  bstrins.d $sp, $zero, 3, 0\n  bl fb_cstart\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl _start\n.type _start,@function\n_start:\n"
	"  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  and sp, x0, #~15\n  bl fb_cstart\n");
#elif defined(__riscv)
__asm__(".text\n.globl _start\n.type _start,@function\n_start:\n"
	"  .option push\n  .option norelax\n  lla gp, __global_pointer$\n  .option pop\n"
	"  mv a0, sp\n  andi sp, sp, -16\n  call fb_cstart\n");
#elif defined(__x86_64__)
__asm__(".text\n.globl _start\n.type _start,@function\n_start:\n"
	"  xor %ebp, %ebp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call fb_cstart\n  hlt\n");
#endif
