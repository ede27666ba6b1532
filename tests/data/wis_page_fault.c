/* A will-it-scale style testcase in the manner of page_fault1: map anonymous
 * memory, touch every page (one fault each), unmap. testcase_prepare decides
 * the size per task; a task that runs without it exits with status 3, so a
 * driver that forgets to call it fails loudly. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

char *testcase_description = "Anonymous memory page faults (flagbench test)";

static unsigned long region_bytes;
static unsigned long prepared_for;

void testcase_prepare(unsigned long nr_tasks)
{
	prepared_for = nr_tasks;
	region_bytes = 2UL << 20; /* 2 MiB per task keeps two tasks within a small machine */
}

void testcase(unsigned long long *iterations, unsigned long nr)
{
	long page = sysconf(_SC_PAGESIZE);
	if (prepared_for == 0 || nr >= prepared_for) {
		fprintf(stderr, "testcase_prepare was not called before task %lu\n", nr);
		exit(3);
	}
	for (;;) {
		char *p = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		for (unsigned long off = 0; off < region_bytes; off += (unsigned long)page) {
			p[off] = 1;
			(*iterations)++;
		}
		munmap(p, region_bytes);
	}
}

void testcase_cleanup(void)
{
	prepared_for = 0;
}
