/* A will-it-scale style testcase: the cheapest system call, in a loop. */
#include <unistd.h>

char *testcase_description = "getppid system call (flagbench test)";

void testcase(unsigned long long *iterations, unsigned long nr)
{
	(void)nr;
	for (;;) {
		getppid();
		(*iterations)++;
	}
}
