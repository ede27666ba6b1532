/*
 * flagbench's /init for a measuring guest (linked statically; nothing else is
 * in the initramfs but the bench programs).
 *
 * Reads /benches, one bench per line, fields separated by tabs:
 *   wrap<TAB>NAME<TAB>PROGRAM<TAB>ARGS...   init brackets the whole run with the
 *                                           markers: one region, 1 iteration
 *   self<TAB>NAME<TAB>PROGRAM<TAB>ARGS...   the program brackets its own measured
 *                                           loop and prints its own region lines
 * and prints on the console (the parser in kernel/guest.py reads these):
 *   FB bench NAME start
 *   FB region iterations=N ns=NS           (a region's plugin counts come in order)
 *   FB bench NAME exit=STATUS | signal=SIG
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

static void run_bench(char *line)
{
	char *argv[MAX_ARGS + 1];
	int argc = 0;
	for (char *tok = strtok(line, "\t\n"); tok && argc < MAX_ARGS; tok = strtok(NULL, "\t\n"))
		argv[argc++] = tok;
	argv[argc] = NULL;
	if (argc < 3) {
		say("FB error malformed bench line");
		return;
	}
	int wrap = strcmp(argv[0], "wrap") == 0;
	const char *name = argv[1];
	say("FB bench %s start", name);
	long long t0 = now_ns();
	if (wrap)
		FB_MARK_START();
	pid_t pid = fork();
	if (pid == 0) {
		execv(argv[2], argv + 2);
		say("FB error exec %s: %s", argv[2], strerror(errno));
		_exit(127);
	}
	int status = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (wrap) {
		FB_MARK_STOP();
		say("FB region iterations=1 ns=%lld", now_ns() - t0);
	}
	if (pid < 0)
		say("FB bench %s exit=fork-failed", name);
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
