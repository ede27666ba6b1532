/* Constant-size struct copies and clears, the kind gcc turns into `rep movsq`
 * / `rep stosq` under kernel flags unless a memcpy strategy says otherwise. */
#include <stddef.h>

struct page_info { unsigned long flags, index, private_, mapping[4], lru[2], pad[16]; };	/* 200 bytes */
struct big_state { unsigned long regs[64]; };						/* 512 bytes */
struct small_msg { unsigned int hdr[6]; };						/* 24 bytes */

void copy_page_info(struct page_info *dst, const struct page_info *src) { *dst = *src; }
void copy_big_state(struct big_state *dst, const struct big_state *src) { *dst = *src; }
void copy_small_msg(struct small_msg *dst, const struct small_msg *src) { *dst = *src; }

void clear_page_info(struct page_info *p) { __builtin_memset(p, 0, sizeof(*p)); }
void clear_big_state(struct big_state *p) { __builtin_memset(p, 0, sizeof(*p)); }

void init_page_info(struct page_info *p, unsigned long idx)
{
	*p = (struct page_info){ .index = idx, .flags = 1 };
}
