/* A placement-sensitive workload: a tight interpreter loop over small
 * non-inlined handlers. Where the loop and the handlers fall relative to
 * 64-byte fetch lines and the uop cache decides much of its speed, so
 * -falign-functions changes it, and so does any shift of earlier code. */
#include <stdint.h>

#define NOINLINE __attribute__((noinline))

/* Seed 002's "selective isolation": align one function of the object to
 * FB_ISOLATE bytes. The object's text section then starts on such a boundary
 * wherever the code linked before it ends, so this object (and what follows it)
 * no longer moves with earlier objects: at most FB_ISOLATE - 1 bytes of padding. */
#ifdef FB_ISOLATE
#define ISOLATE __attribute__((aligned(FB_ISOLATE)))
#else
#define ISOLATE
#endif

ISOLATE NOINLINE uint64_t op_add(uint64_t a, uint64_t b) { return a + b; }
NOINLINE uint64_t op_xor(uint64_t a, uint64_t b) { return a ^ (b << 1); }
NOINLINE uint64_t op_mul(uint64_t a, uint64_t b) { return a * (b | 1); }
NOINLINE uint64_t op_rot(uint64_t a, uint64_t b) { return (a << (b & 31)) | (a >> (64 - (b & 31) - 1)); }
NOINLINE uint64_t op_sub(uint64_t a, uint64_t b) { return a - (b >> 3); }
NOINLINE uint64_t op_min(uint64_t a, uint64_t b) { return a < b ? a : b ^ a; }
NOINLINE uint64_t op_shr(uint64_t a, uint64_t b) { return (a >> 5) + b; }
NOINLINE uint64_t op_mix(uint64_t a, uint64_t b) { return (a ^ b) * 0x9e3779b97f4a7c15ULL; }

typedef uint64_t (*op_fn)(uint64_t, uint64_t);
static op_fn const ops[8] = { op_add, op_xor, op_mul, op_rot, op_sub, op_min, op_shr, op_mix };

/* Run n steps of a fixed pseudo-random program over the handlers. */
NOINLINE uint64_t interpret(unsigned long n)
{
	uint64_t acc = 1, pc = 0x12345;
	for (unsigned long i = 0; i < n; i++) {
		pc = pc * 6364136223846793005ULL + 1442695040888963407ULL;
		acc = ops[pc >> 61](acc, i);
	}
	return acc;
}

/* Two tiny calls per iteration: a tight loop of call/return pairs whose speed
 * on recent x86 cores swings by +-10 % with where its three blocks fall (which
 * fetch lines and uop-cache windows they share): placement, not code. */
NOINLINE uint64_t step_mul(uint64_t a) { return a * 3 + 1; }
NOINLINE uint64_t step_shift(uint64_t a) { return a ^ (a >> 7); }

NOINLINE uint64_t call_chain(unsigned long n)
{
	uint64_t a = 1;
	for (unsigned long i = 0; i < n; i++)
		a = step_shift(step_mul(a)) + i;
	return a;
}
