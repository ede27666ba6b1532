/* Benchmark loops for flagbench's micro harness: uint64_t FN(uint64_t n) runs n
 * iterations. They call into the other objects, so the code under test keeps
 * the variant's flags and is never inlined into the loop. */
#include <stdint.h>

void assign(void *dst, const void *src);
uint32_t jhash(const void *key, uint32_t length, uint32_t initval);

static unsigned char src_buf[64], dst_buf[64];

/* The seed's loop: assign() between pointers that are mostly unaligned. */
uint64_t assign_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		assign(dst_buf + 1 + (i & 15), src_buf + 3 + (i & 31));
	return dst_buf[5];
}

/* jhash of a 36-byte key at an odd address: three 12-byte blocks. */
uint64_t jhash_loop(uint64_t n)
{
	uint32_t h = 0;
	for (uint64_t i = 0; i < n; i++)
		h = jhash(src_buf + 1, 36, h);
	return h;
}
