/*
 * flagbench syscount: a qemu-system TCG plugin that counts the instructions a
 * whole guest machine executes between two marker instructions the guest
 * program runs, split by address into kernel and user, and attributes the
 * kernel's instructions to the symbols of the kernel's System.map.
 *
 * Arguments (qemu-system-* -plugin syscount.so,outfile=PATH,...):
 *   outfile=PATH       results, appended at every end marker (qemu-system may not
 *                      run atexit callbacks when the guest resets, so nothing
 *                      waits for the exit)
 *   kernel_base=HEX    addresses >= this are kernel (x86_64: ffff800000000000)
 *   start=HEX, stop=HEX  the marker instructions' bytes (e.g. 0f1f8001004246 is
 *                      x86 `nopl 0x46420001(%rax)`), only matched below kernel_base
 *   symbols=PATH       System.map; text symbols (t T w W) become the profile's rows
 *
 * Output, one block per region (START .. STOP):
 *   region N kernel K user U
 *   sym N NAME COUNT      (kernel symbols with a non-zero count; "?" = no symbol)
 *   end N
 * and "total pre P kernel K user U" for the whole boot so far. Every kernel
 * instruction is counted twice, into the kernel total and into its symbol's
 * row, so the sum of a region's rows equals its kernel count unless the lookup
 * lost an instruction: the tests check exactly that.
 *
 * Counting is one inline add per executed instruction, chosen at translation:
 * *pre* (low addresses before the first kernel-address instruction was
 * translated: firmware, PVH entry), *kernel*, *user*. An instruction that
 * faults and restarts is counted each time it starts. With -icount (and
 * therefore one TCG thread for all vCPUs) the non-atomic adds are exact.
 *
 * No Debian package ships qemu-plugin.h: the QEMU_PLUGIN_VERSION 1 subset
 * flagbench uses is declared in qemu_plugin_api.h.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

#define MAX_MARKER 16

struct sym { uint64_t addr; char *name; };

static uint64_t pre, kernel, user;       /* bumped by inline TCG code */
static uint64_t *sym_counts;             /* n_syms + 1 rows; the last one is "?" */
static uint64_t *sym_at_start;
static struct sym *syms;
static size_t n_syms;
static uint64_t kernel_base = 0xffff800000000000ULL;
static bool seen_kernel;
static unsigned char start_bytes[MAX_MARKER], stop_bytes[MAX_MARKER];
static size_t start_len, stop_len;
static char outfile[4096];
static bool in_region;
static unsigned long region;
static uint64_t kernel_at_start, user_at_start;

static int by_addr(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int load_symbols(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "syscount: cannot read %s\n", path);
		return -1;
	}
	size_t cap = 4096;
	syms = malloc(cap * sizeof *syms);
	char line[1024], name[512], type;
	unsigned long long addr;
	int rc = syms ? 0 : -1;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%llx %c %511s", &addr, &type, name) != 3)
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (n_syms == cap) {
			struct sym *more = realloc(syms, 2 * cap * sizeof *syms);
			if (!more) {
				rc = -1;
				break;
			}
			syms = more;
			cap *= 2;
		}
		syms[n_syms].addr = addr;
		syms[n_syms].name = strdup(name);
		if (!syms[n_syms].name)
			rc = -1;
		else
			n_syms++;
	}
	fclose(f);
	if (rc != 0) {
		fprintf(stderr, "syscount: out of memory reading %s\n", path);
		return -1;
	}
	qsort(syms, n_syms, sizeof *syms, by_addr);
	return 0;
}

/* The row of the last symbol at or below addr; n_syms ("?") when there is none. */
static size_t symbol_row(uint64_t addr)
{
	size_t lo = 0, hi = n_syms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? n_syms : lo - 1;
}

static void on_start(unsigned int vcpu, void *udata)
{
	(void)vcpu; (void)udata;
	in_region = true;
	kernel_at_start = kernel;
	user_at_start = user;
	memcpy(sym_at_start, sym_counts, (n_syms + 1) * sizeof *sym_counts);
}

static void on_stop(unsigned int vcpu, void *udata)
{
	(void)vcpu; (void)udata;
	if (!in_region)
		return;
	in_region = false;
	FILE *f = fopen(outfile, "a");
	if (!f)
		return;
	fprintf(f, "region %lu kernel %llu user %llu\n", region,
		(unsigned long long)(kernel - kernel_at_start), (unsigned long long)(user - user_at_start));
	for (size_t i = 0; i <= n_syms; i++) {
		uint64_t d = sym_counts[i] - sym_at_start[i];
		if (d)
			fprintf(f, "sym %lu %s %llu\n", region, i < n_syms ? syms[i].name : "?", (unsigned long long)d);
	}
	fprintf(f, "end %lu\n", region);
	fprintf(f, "total pre %llu kernel %llu user %llu\n", (unsigned long long)pre,
		(unsigned long long)kernel, (unsigned long long)user);
	fclose(f);
	region++;
}

static bool matches(struct qemu_plugin_insn *insn, const unsigned char *bytes, size_t len)
{
	return len && qemu_plugin_insn_size(insn) == len && memcmp(qemu_plugin_insn_data(insn), bytes, len) == 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		if (pc >= kernel_base) {
			seen_kernel = true;
			qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &kernel, 1);
			qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
								   &sym_counts[symbol_row(pc)], 1);
			continue;
		}
		qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
							   seen_kernel ? &user : &pre, 1);
		if (!seen_kernel)
			continue;
		if (matches(insn, start_bytes, start_len))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_start, QEMU_PLUGIN_CB_NO_REGS, NULL);
		else if (matches(insn, stop_bytes, stop_len))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_stop, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

static int parse_hex(const char *text, unsigned char *out, size_t *len)
{
	size_t n = strlen(text);
	if (n % 2 || n / 2 > MAX_MARKER)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned int byte;
		if (sscanf(text + 2 * i, "%2x", &byte) != 1)
			return -1;
		out[i] = (unsigned char)byte;
	}
	*len = n / 2;
	return 0;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	const char *symbols = NULL;
	if (!info->system_emulation) {
		fprintf(stderr, "syscount: qemu-system only (plugin/insncount.c is the qemu-user one)\n");
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int bad = 0;
		if (strncmp(a, "outfile=", 8) == 0)
			snprintf(outfile, sizeof outfile, "%s", a + 8);
		else if (strncmp(a, "kernel_base=", 12) == 0)
			kernel_base = strtoull(a + 12, NULL, 16);
		else if (strncmp(a, "start=", 6) == 0)
			bad = parse_hex(a + 6, start_bytes, &start_len);
		else if (strncmp(a, "stop=", 5) == 0)
			bad = parse_hex(a + 5, stop_bytes, &stop_len);
		else if (strncmp(a, "symbols=", 8) == 0)
			symbols = a + 8;
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "syscount: bad argument %s\n", a);
			return -1;
		}
	}
	if (!outfile[0] || !start_len || !stop_len) {
		fprintf(stderr, "syscount: outfile=, start= and stop= are required\n");
		return -1;
	}
	if (symbols && load_symbols(symbols) != 0)
		return -1;
	sym_counts = calloc(n_syms + 1, sizeof *sym_counts);
	sym_at_start = calloc(n_syms + 1, sizeof *sym_at_start);
	if (!sym_counts || !sym_at_start) {
		fprintf(stderr, "syscount: out of memory for %zu symbols\n", n_syms);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
