/*
 * flagbench's /init for a measuring guest (linked statically; nothing else is
 * in the initramfs but the bench programs).
 *
 * Reads /benches, one bench per line, fields separated by tabs:
 *   wrap<TAB>NAME<TAB>MS<TAB>PROGRAM<TAB>ARGS...   init brackets the whole run with
 *                                                  the markers: one region, 1 iteration
 *   self<TAB>NAME<TAB>MS<TAB>PROGRAM<TAB>ARGS...   the program brackets its own
 *                                                  measured loop, prints its region lines
 * MS bounds the bench in guest milliseconds: then init kills its process group and
 * goes on with the next (a timer child sleeps MS; no timer syscalls: tinyconfig has
 * no POSIX_TIMERS). It prints on the console (run/guest/guest.py parses these):
 *   FB bench NAME start
 *   FB region iterations=N ns=NS           (a region's plugin counts come in order)
 *   FB bench NAME exit=STATUS | signal=SIG | timeout
 *   FB done
 * then reboot(RB_AUTOBOOT), which with qemu's -no-reboot ends qemu cleanly
 * (power-off needs ACPI, which a tinyconfig kernel lacks).
 * With "flagbench.exit" on the kernel command line init exits instead (the
 * kernel panics: "Attempted to kill init"), with "flagbench.hang" it waits
 * forever (a hung boot): the tests use both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest_markers.h"

#define MAX_ARGS 64

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	(void)!write(1, line, n);   /* one write per line: no interleaving mid-line */
}

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void finish(void)
{
	say("FB done");
	sync();
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

/* Whether WORD is on the kernel command line (flagbench.exit, flagbench.hang). */
static int requested(const char *word)
{
	char cmdline[4096] = "";
	int fd = open("/proc/cmdline", O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
	close(fd);
	if (n > 0)
		cmdline[n] = 0;
	return strstr(cmdline, word) != NULL;
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* A child that exits after MS: its end is the bench's deadline. */
static pid_t start_timer(long ms)
{
	pid_t timer = fork();
	if (timer == 0) {
		sleep_ms(ms);
		_exit(0);
	}
	return timer;
}

/* The bench's wait status; *timed_out when the timer ended first and the bench's
 * process group was killed. init is PID 1: wait() also reaps orphans, ignored here. */
static int wait_bench(pid_t pid, pid_t timer, int *timed_out)
{
	int status = 0;
	for (;;) {
		int st;
		pid_t ended = wait(&st);
		if (ended < 0) {
			if (errno == EINTR)
				continue;
			return status;
		}
		if (ended == pid)
			return st;
		if (ended == timer && !*timed_out) {
			*timed_out = 1;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
	}
}

static void run_bench(char *line)
{
	char *argv[MAX_ARGS + 1];
	int argc = 0;
	for (char *tok = strtok(line, "\t\n"); tok && argc < MAX_ARGS; tok = strtok(NULL, "\t\n"))
		argv[argc++] = tok;
	argv[argc] = NULL;
	char *end = NULL;
	long timeout_ms = argc >= 4 ? strtol(argv[2], &end, 10) : 0;
	if (argc < 4 || !end || *end || timeout_ms < 1) {
		say("FB error malformed bench line");
		return;
	}
	int wrap = strcmp(argv[0], "wrap") == 0;
	const char *name = argv[1];
	pid_t timer = start_timer(timeout_ms);   /* before the markers: not in the region */
	say("FB bench %s start", name);
	long long t0 = now_ns();
	if (wrap)
		FB_MARK_START();
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		execv(argv[3], argv + 3);
		say("FB error exec %s: %s", argv[3], strerror(errno));
		_exit(127);
	}
	int status = 0, timed_out = 0;
	if (pid > 0) {
		setpgid(pid, pid);   /* as the child does: whichever runs first */
		status = wait_bench(pid, timer, &timed_out);
	}
	if (wrap) {
		FB_MARK_STOP();
		say("FB region iterations=1 ns=%lld", now_ns() - t0);
	}
	if (timer > 0 && !timed_out) {
		kill(timer, SIGKILL);
		waitpid(timer, NULL, 0);
	}
	if (pid < 0)
		say("FB bench %s exit=fork-failed", name);
	else if (timed_out)
		say("FB bench %s timeout", name);
	else if (WIFSIGNALED(status))
		say("FB bench %s signal=%d", name, WTERMSIG(status));
	else
		say("FB bench %s exit=%d", name, WEXITSTATUS(status));
}

int main(void)
{
	mkdir("/dev", 0755);
	mkdir("/proc", 0755);
	mkdir("/tmp", 01777);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);   /* absent without DEVTMPFS: fine */
	mount("proc", "/proc", "proc", 0, NULL);
	say("FB init");
	if (requested("flagbench.exit")) {
		say("FB exiting on request");
		return 1;
	}
	if (requested("flagbench.hang")) {
		say("FB hanging on request");
		for (;;)
			pause();
	}
	FILE *list = fopen("/benches", "r");
	if (!list) {
		say("FB error no /benches: %s", strerror(errno));
		finish();
	}
	char line[4096];
	while (fgets(line, sizeof line, list))
		if (line[0] != '#' && line[0] != '\n')
			run_bench(line);
	fclose(list);
	finish();
	return 0;
}
