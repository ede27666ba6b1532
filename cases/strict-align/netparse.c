/* Kernel-like helpers that read packed, possibly unaligned wire formats. */
#include <stdint.h>

struct __attribute__((packed)) iphdr_like {
	uint8_t ver_ihl, tos;
	uint16_t tot_len, id, frag_off;
	uint8_t ttl, protocol;
	uint16_t check;
	uint32_t saddr, daddr;
};

uint16_t ip_fast_csum_like(const void *iph, unsigned int ihl)
{
	const uint8_t *p = iph;
	uint64_t sum = 0;
	for (unsigned int i = 0; i < ihl; i++) {
		uint32_t w;
		__builtin_memcpy(&w, p + 4 * i, 4);
		sum += w;
	}
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t flow_key(const struct iphdr_like *h)
{
	return h->saddr ^ h->daddr ^ ((uint32_t)h->protocol << 16) ^ h->id;
}

uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;
	__builtin_memcpy(&v, p, 8);
	return v;
}
