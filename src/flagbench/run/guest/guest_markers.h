/* The marker instructions the syscount plugin (plugin/syscount.c) watches for:
 * no-ops whose encoding carries "FB" and 1 (start) or 2 (stop). boot.py passes
 * the same bytes to the plugin; keep the two in step. */
#ifndef FLAGBENCH_GUEST_MARKERS_H
#define FLAGBENCH_GUEST_MARKERS_H
#if defined(__x86_64__)
/* nopl 0x46420001(%rax) = 0f 1f 80 01 00 42 46 */
#define FB_MARK_START() __asm__ volatile("nopl 0x46420001(%%rax)" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile("nopl 0x46420002(%%rax)" ::: "memory")
#elif defined(__aarch64__)
/* unallocated HINT space executes as a no-op: hint #0x72 / #0x73 */
#define FB_MARK_START() __asm__ volatile("hint #0x72" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile("hint #0x73" ::: "memory")
#elif defined(__riscv) && __riscv_xlen == 64
/* addi x0, x0, 1 / 2: HINT encodings (rd = x0), no-ops; spelled as words so the
 * assembler cannot compress them */
#define FB_MARK_START() __asm__ volatile(".4byte 0x00100013" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile(".4byte 0x00200013" ::: "memory")
#elif defined(__arm__) && defined(__thumb2__)
/* unallocated T32 HINT space (like nop.w = f3af8000) executes as a no-op */
#define FB_MARK_START() __asm__ volatile(".inst.w 0xf3af8072" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile(".inst.w 0xf3af8073" ::: "memory")
#elif defined(__arm__)
/* unallocated A32 HINT space (like NOP = e320f000) executes as a no-op */
#define FB_MARK_START() __asm__ volatile(".inst 0xe320f072" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile(".inst 0xe320f073" ::: "memory")
#elif defined(__hppa__)
/* ldo 1(%r0),%r0 / ldo 2(%r0),%r0: results go to r0, no-ops */
#define FB_MARK_START() __asm__ volatile(".word 0x34000002" ::: "memory")
#define FB_MARK_STOP() __asm__ volatile(".word 0x34000004" ::: "memory")
#else
#error "flagbench guest markers are defined for x86_64, aarch64, riscv64, arm and hppa only"
#endif
#endif
