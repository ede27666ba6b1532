/* The seed's test: copy 8 bytes between possibly unaligned pointers. */
#include <stdint.h>

void assign(void *dst, const void *src)
{
	__builtin_memcpy(dst, src, 8);
}
