/* Test stand-in for src/flagbench/harness/fbrt.h, used only while that file does
 * not exist yet (a quoted #include finds the harness's own directory first). */
#ifndef FBRT_H
#define FBRT_H
#include <stdint.h>
#include <stddef.h>
uint64_t fb_now_ns(void);
void fb_print(const char *key, uint64_t value);
void fb_puts(const char *s);
__attribute__((noreturn)) void fb_exit(int code);
#endif
