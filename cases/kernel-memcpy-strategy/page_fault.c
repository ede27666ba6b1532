/* A will-it-scale testcase like the seed's: map 2 MB minus one page of
 * anonymous memory, touch every page, unmap; one iteration per page touched. */
#include <sys/mman.h>
#include <unistd.h>
#include <assert.h>

#define MEMSIZE ((2UL << 20) - 4096)

char *testcase_description = "Anonymous memory page fault (2MB - 4KB)";

void testcase(unsigned long long *iterations, unsigned long nr)
{
	unsigned long pgsize = getpagesize();

	(void)nr;
	while (1) {
		char *c = mmap(NULL, MEMSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert(c != MAP_FAILED);
		for (unsigned long i = 0; i < MEMSIZE; i += pgsize) {
			c[i] = 0;
			(*iterations)++;
		}
		munmap(c, MEMSIZE);
	}
}
