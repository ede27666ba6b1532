/* Benchmark loops over the struct copies and clears: uint64_t FN(uint64_t n). */
#include <stdint.h>

struct page_info { unsigned long flags, index, private_, mapping[4], lru[2], pad[16]; };
struct big_state { unsigned long regs[64]; };

void copy_page_info(struct page_info *dst, const struct page_info *src);
void clear_page_info(struct page_info *p);
void copy_big_state(struct big_state *dst, const struct big_state *src);

static struct page_info pages[2];
static struct big_state states[2];

uint64_t copy_page_info_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		copy_page_info(&pages[i & 1], &pages[!(i & 1)]);
	return pages[0].flags;
}

uint64_t clear_page_info_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		clear_page_info(&pages[i & 1]);
	return pages[1].index;
}

uint64_t copy_big_state_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		copy_big_state(&states[i & 1], &states[!(i & 1)]);
	return states[0].regs[3];
}
