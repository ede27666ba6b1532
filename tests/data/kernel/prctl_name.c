/* A guest bench for object bisection: prctl(PR_GET_NAME) runs __get_task_comm (fs/exec.c),
 * which get-task-comm.patch makes 8 instructions longer. */
#include <sys/prctl.h>

int main(void)
{
	char name[16];

	for (int i = 0; i < 20000; i++)
		prctl(PR_GET_NAME, name, 0, 0, 0);
	return 0;
}
