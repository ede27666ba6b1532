/* A Jenkins lookup3-style hash of the kernel's jhash() shape: the key is read
 * as three u32 per 12-byte block from a byte pointer that may be unaligned.
 * Written for flagbench; the mixing constants are Bob Jenkins' public ones. */
#include <stdint.h>

static inline uint32_t rol32(uint32_t w, unsigned s) { return (w << s) | (w >> (32 - s)); }

static inline uint32_t get_unaligned_u32(const uint8_t *p)
{
	uint32_t v;
	__builtin_memcpy(&v, p, sizeof(v));	/* the kernel's get_unaligned() */
	return v;
}

#define MIX(a, b, c) do {                         \
	a -= c; a ^= rol32(c, 4);  c += b;        \
	b -= a; b ^= rol32(a, 6);  a += c;        \
	c -= b; c ^= rol32(b, 8);  b += a;        \
	a -= c; a ^= rol32(c, 16); c += b;        \
	b -= a; b ^= rol32(a, 19); a += c;        \
	c -= b; c ^= rol32(b, 4);  b += a;        \
} while (0)

#define FINAL(a, b, c) do {                       \
	c ^= b; c -= rol32(b, 14);                \
	a ^= c; a -= rol32(c, 11);                \
	b ^= a; b -= rol32(a, 25);                \
	c ^= b; c -= rol32(b, 16);                \
	a ^= c; a -= rol32(c, 4);                 \
	b ^= a; b -= rol32(a, 14);                \
	c ^= b; c -= rol32(b, 24);                \
} while (0)

uint32_t jhash(const void *key, uint32_t length, uint32_t initval)
{
	const uint8_t *k = key;
	uint32_t a, b, c;

	a = b = c = 0xdeadbeef + length + initval;
	while (length > 12) {
		a += get_unaligned_u32(k);
		b += get_unaligned_u32(k + 4);
		c += get_unaligned_u32(k + 8);
		MIX(a, b, c);
		length -= 12;
		k += 12;
	}
	switch (length) {	/* the last block: byte by byte, as in the kernel */
	case 12: c += (uint32_t)k[11] << 24; /* fall through */
	case 11: c += (uint32_t)k[10] << 16; /* fall through */
	case 10: c += (uint32_t)k[9] << 8;   /* fall through */
	case 9:  c += k[8];                  /* fall through */
	case 8:  b += (uint32_t)k[7] << 24;  /* fall through */
	case 7:  b += (uint32_t)k[6] << 16;  /* fall through */
	case 6:  b += (uint32_t)k[5] << 8;   /* fall through */
	case 5:  b += k[4];                  /* fall through */
	case 4:  a += (uint32_t)k[3] << 24;  /* fall through */
	case 3:  a += (uint32_t)k[2] << 16;  /* fall through */
	case 2:  a += (uint32_t)k[1] << 8;   /* fall through */
	case 1:  a += k[0];
		FINAL(a, b, c);
		break;
	case 0:
		break;
	}
	return c;
}
