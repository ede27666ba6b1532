/* flagbench harness runtime: the little a benchmark harness needs from its
 * environment, the same on every target. Over glibc (fbrt_libc.c) where the
 * target has a static C library; without one (fbrt_freestanding.c: its own _start,
 * raw system calls, and the string functions compilers emit calls to) on
 * loongarch64. Harness code uses only what is declared here. */
#ifndef FBRT_H
#define FBRT_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fb_now_ns(void);
/* One "key value\n" line on stdout, value in decimal: the metrics the Python side parses. */
void fb_print(const char *key, uint64_t value);
/* Writes s to stdout as it is (no newline added). */
void fb_puts(const char *s);
/* Flushes stdout and ends the process with this status. */
__attribute__((noreturn)) void fb_exit(int code);

/* Provided by the C library, or by fbrt_freestanding.c where there is none. */
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

#endif
