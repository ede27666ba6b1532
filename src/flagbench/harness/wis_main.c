/*
 * flagbench's driver for will-it-scale style testcases (linked with an
 * unmodified testcase file). Written for flagbench; follows the testcase ABI:
 *
 *   char *testcase_description;
 *   void testcase(unsigned long long *iterations, unsigned long nr);   loops forever
 *   void testcase_prepare(unsigned long nr_tasks);                     optional
 *   void testcase_cleanup(void);                                       optional
 *   void new_task(void *(*fn)(void *), void *arg);                     provided here
 *
 * Built twice: tasks are processes (fork), or threads with -DTHREADS.
 *
 * usage: wis_main TASKS SAMPLES INTERVAL_NS
 * prints "# description TEXT", "# mode processes|threads", then one line per
 * sample: "sample INDEX ELAPSED_NS ITERATIONS" (iterations of all tasks during
 * that interval). The caller decides which samples are warm-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Each task's counter on its own line (128 bytes covers adjacent-line prefetch),
 * so counting never makes the tasks share a cache line. */
#define COUNTER_STRIDE 128
#define MAX_TASKS 1024

extern char *testcase_description;
void testcase(unsigned long long *iterations, unsigned long nr);
void testcase_prepare(unsigned long nr_tasks) __attribute__((weak));
void testcase_cleanup(void) __attribute__((weak));

static char *counters;              /* MAP_SHARED: children's counts stay visible */
static cpu_set_t allowed;

static void die(const char *what)
{
	fprintf(stderr, "wis: %s: %s\n", what, strerror(errno));
	exit(1);
}

static unsigned long long *counter(unsigned long i)
{
	return (unsigned long long *)(counters + i * COUNTER_STRIDE);
}

/* Task i runs on the i-th allowed CPU (round robin), so tasks do not migrate. */
static void pin(unsigned long i, cpu_set_t *set)
{
	int n = CPU_COUNT(&allowed), seen = 0;
	CPU_ZERO(set);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if ((unsigned long)seen++ == i % (unsigned long)n) {
			CPU_SET(cpu, set);
			return;
		}
	}
}

struct task { void *(*fn)(void *); void *arg; };

#ifdef THREADS
static const char *mode = "threads";

void new_task(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	int err = pthread_create(&t, NULL, fn, arg);
	if (err) {
		errno = err;
		die("pthread_create");
	}
	pthread_detach(t);
}

static void *run_testcase(void *arg)
{
	unsigned long i = (unsigned long)arg;
	cpu_set_t set;
	pin(i, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	testcase(counter(i), i);
	return NULL;
}

static void start_task(unsigned long i)
{
	new_task(run_testcase, (void *)i);
}

static void stop_tasks(void) { /* threads end with the process */ }

static void check_tasks(unsigned long tasks) { (void)tasks; /* a thread's exit() ends us all */ }
#else
static const char *mode = "processes";
static pid_t children[2 * MAX_TASKS]; /* tasks, and helpers the driver made with new_task */
static unsigned long n_children;

void new_task(void *(*fn)(void *), void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* helpers die with the task that made them */
		fn(arg);
		_exit(0);
	}
	if (n_children < 2 * MAX_TASKS)
		children[n_children++] = pid; /* killed at the end when made by the driver itself */
}

static void stop_tasks(void);

static void start_task(unsigned long i)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		cpu_set_t set;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin(i, &set);
		sched_setaffinity(0, sizeof set, &set);
		testcase(counter(i), i);
		_exit(0);
	}
	children[n_children++] = pid;
}

/* A task that ends (crash, exit) would silently lower the rate: stop with its reason. */
static void check_tasks(unsigned long tasks)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (unsigned long i = 0; i < tasks; i++) {
			if (children[i] != pid)
				continue;
			children[i] = children[--n_children];
			stop_tasks();
			if (WIFSIGNALED(status))
				fprintf(stderr, "wis: task %lu killed by SIG%s\n", i, sigabbrev_np(WTERMSIG(status)));
			else
				fprintf(stderr, "wis: task %lu exited with status %d\n", i, WEXITSTATUS(status));
			exit(1);
		}
	}
}

static void stop_tasks(void)
{
	for (unsigned long i = 0; i < n_children; i++)
		kill(children[i], SIGKILL);
	for (unsigned long i = 0; i < n_children; i++)
		waitpid(children[i], NULL, 0);
}
#endif

static unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long total(unsigned long tasks)
{
	unsigned long long sum = 0;
	for (unsigned long i = 0; i < tasks; i++)
		sum += __atomic_load_n(counter(i), __ATOMIC_RELAXED);
	return sum;
}

/* Page-table benchmarks vary with address-space layout: run without ASLR (re-exec once). */
static void without_aslr(char **argv)
{
	int persona = personality(0xffffffff);
	if (persona == -1 || (persona & ADDR_NO_RANDOMIZE))
		return;
	if (personality((unsigned long)persona | ADDR_NO_RANDOMIZE) == -1)
		return; /* not permitted here: run with ASLR rather than not at all */
	execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TASKS SAMPLES INTERVAL_NS\n", argv[0]);
		return 2;
	}
	without_aslr(argv);
	unsigned long tasks = strtoul(argv[1], NULL, 10);
	unsigned long samples = strtoul(argv[2], NULL, 10);
	unsigned long long interval = strtoull(argv[3], NULL, 10);
	if (tasks < 1 || tasks > MAX_TASKS || interval == 0) {
		fprintf(stderr, "wis: tasks must be 1..%d and the interval positive\n", MAX_TASKS);
		return 2;
	}
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
		die("sched_getaffinity");
	counters = mmap(NULL, (size_t)tasks * COUNTER_STRIDE, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counters == MAP_FAILED)
		die("mmap");
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# description %s\n# mode %s\n", testcase_description, mode);

	if (testcase_prepare)
		testcase_prepare(tasks);
	for (unsigned long i = 0; i < tasks; i++)
		start_task(i);

	unsigned long long prev = total(tasks), start = now_ns(), last = start;
	for (unsigned long s = 0; s < samples; s++) {
		unsigned long long deadline = start + (s + 1) * interval;
		struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		unsigned long long now = now_ns(), sum = total(tasks);
		check_tasks(tasks);
		printf("sample %lu %llu %llu\n", s, now - last, sum - prev);
		prev = sum;
		last = now;
	}
	stop_tasks();
	if (testcase_cleanup)
		testcase_cleanup();
	return 0;
}
