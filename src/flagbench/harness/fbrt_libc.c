/* flagbench harness runtime over the C library (glibc, linked statically). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fbrt.h"

uint64_t fb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fb_print(const char *key, uint64_t value)
{
	printf("%s %llu\n", key, (unsigned long long)value);
}

void fb_puts(const char *s)
{
	fputs(s, stdout);
}

void fb_exit(int code)
{
	exit(code);   /* flushes stdout */
}
