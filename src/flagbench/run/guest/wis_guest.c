/*
 * flagbench's in-guest driver for will-it-scale testcases (linked statically
 * with an unmodified testcase file; same testcase ABI as harness/wis_main.c).
 *
 * usage: wis_guest TASKS WARMUP_MS DURATION_MS
 * Starts TASKS tasks (processes, or threads with -DTHREADS), lets them run
 * WARMUP_MS of guest time, then brackets DURATION_MS of guest time with the
 * syscount markers and prints
 *   FB region iterations=N ns=NS
 * N counts the iterations of all tasks inside the bracket. Under -icount the
 * guest clock is derived from the instruction count, so N repeats exactly.
 * A task that dies early fails the bench (exit 1, with a message, after the
 * region line, which always follows a stop marker).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest_markers.h"

#define COUNTER_STRIDE 128
#ifndef MAX_TASKS
#define MAX_TASKS 1024   /* guest.py passes benchspec.MAX_TASKS, the spec's limit */
#endif

extern char *testcase_description;
void testcase(unsigned long long *iterations, unsigned long nr);
void testcase_prepare(unsigned long nr_tasks) __attribute__((weak));
void testcase_cleanup(void) __attribute__((weak));

static char *counters;
static pid_t pids[MAX_TASKS];
static unsigned long n_started;

static unsigned long long *counter(unsigned long i)
{
	return (unsigned long long *)(counters + i * COUNTER_STRIDE);
}

static unsigned long long total(unsigned long n)
{
	unsigned long long sum = 0;
	for (unsigned long i = 0; i < n; i++)
		sum += __atomic_load_n(counter(i), __ATOMIC_RELAXED);
	return sum;
}

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

struct task { void *(*fn)(void *); void *arg; };

static void one_more_task(void)
{
	if (n_started >= MAX_TASKS) {
		fprintf(stderr, "wis_guest: more than %d tasks\n", MAX_TASKS);
		exit(1);
	}
}

#ifdef THREADS
void new_task(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	one_more_task();
	if (pthread_create(&t, NULL, fn, arg) != 0) {
		fprintf(stderr, "wis_guest: pthread_create failed\n");
		exit(1);
	}
	n_started++;
}
#else
void new_task(void *(*fn)(void *), void *arg)
{
	one_more_task();
	pid_t parent = getpid(), pid = fork();
	if (pid < 0) {
		perror("wis_guest: fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)   /* the driver died before prctl took effect */
			_exit(1);
		fn(arg);
		_exit(0);
	}
	pids[n_started++] = pid;
}
#endif

static void *run_testcase(void *arg)
{
	unsigned long i = (unsigned long)arg;
	testcase(counter(i), i);
	return NULL;
}

/* A decimal argument, or -1 when it is not one whole number in range. */
static long number(const char *text)
{
	char *end;
	errno = 0;
	long value = strtol(text, &end, 10);
	if (errno || end == text || *end || value < 0)
		return -1;
	return value;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: wis_guest TASKS WARMUP_MS DURATION_MS\n");
		return 2;
	}
	long tasks = number(argv[1]), warmup_ms = number(argv[2]), duration_ms = number(argv[3]);
	if (tasks < 1 || tasks > MAX_TASKS || warmup_ms < 0 || duration_ms < 1) {
		fprintf(stderr, "wis_guest: bad arguments\n");
		return 2;
	}
	counters = mmap(NULL, MAX_TASKS * COUNTER_STRIDE, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counters == MAP_FAILED) {
		perror("wis_guest: mmap");
		return 1;
	}
	if (testcase_prepare)
		testcase_prepare(tasks);
	for (long i = 0; i < tasks; i++)
		new_task(run_testcase, (void *)i);
	sleep_ms(warmup_ms);
	unsigned long long before = total(tasks);
	long long t0 = now_ns();
	FB_MARK_START();
	sleep_ms(duration_ms);
	FB_MARK_STOP();
	long long t1 = now_ns();
	unsigned long long after = total(tasks);
	/* Printed at once: the parser pairs these lines with the plugin's regions in order. */
	printf("FB region iterations=%llu ns=%lld\n", after - before, t1 - t0);
	fflush(stdout);
	int failed = 0;
	for (unsigned long i = 0; i < n_started; i++) {
		int status;
		if (pids[i] && waitpid(pids[i], &status, WNOHANG) == pids[i]) {
			fprintf(stderr, "wis_guest: task %lu ended early (status %#x)\n", i, status);
			failed = 1;
		}
		if (pids[i])
			kill(pids[i], SIGKILL);
	}
	while (wait(NULL) > 0)
		;
	if (failed)
		return 1;
	if (testcase_cleanup)
		testcase_cleanup();
	return 0;
}
