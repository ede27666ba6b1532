/* The guest bench: 10,000 getppid() calls, counted exactly inside each commit's kernel. */
#include <unistd.h>

int main(void)
{
	for (int i = 0; i < 10000; i++)
		getppid();
	return 0;
}
