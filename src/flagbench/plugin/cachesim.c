/*
 * flagbench cachesim: a qemu-user TCG plugin that runs the guest's instruction fetches
 * and data accesses through set-associative LRU caches (L1I, L1D, a unified L2 behind
 * both), the logic of qemu's contrib/plugins/cache.c rebuilt on flagbench's API subset,
 * for several cache geometries at once (one per modelled core), and counts misaligned
 * accesses on the way.
 *
 * Arguments (qemu -plugin cachesim.so,outfile=PATH,cache=GEOMETRY[,cache=GEOMETRY...]):
 *   outfile=PATH     where "key value" lines are written at exit
 *   cache=GEOMETRY   L1I_BYTES:L1I_WAYS:L1D_BYTES:L1D_WAYS:L2_BYTES:L2_WAYS:LINE_BYTES
 *                    (L2_BYTES 0: no L2); up to 8, written as c0.*, c1.* in order.
 * Output: insns, loads, stores, misaligned (an access whose address is not a multiple
 * of its size), line_crossing (one that spans two cache lines: both lines are looked up,
 * and counted as two accesses), and per geometry cN.l1i_access, cN.l1i_miss,
 * cN.l1d_access, cN.l1d_miss, cN.l2_access, cN.l2_miss.
 *
 * Addresses are guest virtual addresses (qemu-user: one address space), an instruction
 * fetch is one access at the instruction's first byte, L2 sees every L1 miss and nothing
 * is written back (no dirty state): as contrib's cache.c. The guest must be single-threaded
 * (no locks on the caches). Every instruction and every access costs a callback: a run
 * takes about 20x longer than under insncount.c.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu_plugin_api.h"

#define MAX_GEOMETRIES 8

struct cache {
	uint64_t *tags;          /* sets x ways, each set ordered most to least recently used; 0 empty */
	unsigned sets, ways, line_shift;
	uint64_t accesses, misses;
};

struct geometry {
	struct cache l1i, l1d, l2;
	bool has_l2;
};

static struct geometry geometries[MAX_GEOMETRIES];
static int n_geometries;
static uint64_t insns, loads, stores, misaligned, line_crossing;
static char outfile[4096];
static pid_t owner_pid;

static bool cache_init(struct cache *c, unsigned long bytes, unsigned ways, unsigned line)
{
	if (!ways || !line || (line & (line - 1)) || bytes % ((unsigned long)ways * line))
		return false;
	c->sets = (unsigned)(bytes / ((unsigned long)ways * line));
	if (!c->sets || (c->sets & (c->sets - 1)))
		return false;
	c->ways = ways;
	c->line_shift = (unsigned)__builtin_ctz(line);
	c->tags = calloc((size_t)c->sets * ways, sizeof c->tags[0]);
	return c->tags != NULL;
}

/* Looks LINE up (the address >> line_shift, plus one so that 0 means empty); true on a hit. */
static bool cache_access(struct cache *c, uint64_t line)
{
	uint64_t tag = line + 1;
	uint64_t *set = c->tags + (size_t)(line & (c->sets - 1)) * c->ways;
	unsigned way = 0;
	c->accesses++;
	while (way < c->ways && set[way] != tag)
		way++;
	bool hit = way < c->ways;
	if (!hit) {
		c->misses++;
		way = c->ways - 1;               /* the least recently used goes */
	}
	memmove(set + 1, set, way * sizeof set[0]);
	set[0] = tag;
	return hit;
}

static void access_line(struct geometry *g, struct cache *l1, uint64_t addr)
{
	if (!cache_access(l1, addr >> l1->line_shift) && g->has_l2)
		cache_access(&g->l2, addr >> g->l2.line_shift);
}

static void on_insn(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	uint64_t addr = (uint64_t)(uintptr_t)udata;
	insns++;
	for (int i = 0; i < n_geometries; i++)
		access_line(&geometries[i], &geometries[i].l1i, addr);
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	(void)vcpu; (void)udata;
	uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
	if (qemu_plugin_mem_is_store(info))
		stores++;
	else
		loads++;
	if (vaddr & (size - 1))
		misaligned++;
	for (int i = 0; i < n_geometries; i++) {
		struct geometry *g = &geometries[i];
		uint64_t last = vaddr + size - 1;
		access_line(g, &g->l1d, vaddr);
		if ((vaddr >> g->l1d.line_shift) != (last >> g->l1d.line_shift)) {
			access_line(g, &g->l1d, last);
			if (i == 0)
				line_crossing++;
		}
	}
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS,
						       (void *)(uintptr_t)vaddr);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
	}
}

static void write_counts(qemu_plugin_id_t id, void *udata)
{
	(void)id; (void)udata;
	if (getpid() != owner_pid || !outfile[0])
		return;
	FILE *f = fopen(outfile, "w");
	if (!f)
		return;
	fprintf(f, "insns %llu\nloads %llu\nstores %llu\nmisaligned %llu\nline_crossing %llu\n",
		(unsigned long long)insns, (unsigned long long)loads, (unsigned long long)stores,
		(unsigned long long)misaligned, (unsigned long long)line_crossing);
	for (int i = 0; i < n_geometries; i++) {
		struct geometry *g = &geometries[i];
		const struct cache *levels[3] = {&g->l1i, &g->l1d, &g->l2};
		const char *names[3] = {"l1i", "l1d", "l2"};
		for (int l = 0; l < (g->has_l2 ? 3 : 2); l++)
			fprintf(f, "c%d.%s_access %llu\nc%d.%s_miss %llu\n", i, names[l],
				(unsigned long long)levels[l]->accesses, i, names[l],
				(unsigned long long)levels[l]->misses);
	}
	fclose(f);
}

static bool parse_geometry(const char *text, struct geometry *g)
{
	unsigned long v[7];
	char *end;
	for (int i = 0; i < 7; i++) {
		v[i] = strtoul(text, &end, 10);
		if (end == text || (i < 6 ? *end != ':' : *end != '\0'))
			return false;
		text = end + 1;
	}
	g->has_l2 = v[4] != 0;
	return cache_init(&g->l1i, v[0], (unsigned)v[1], (unsigned)v[6])
	    && cache_init(&g->l1d, v[2], (unsigned)v[3], (unsigned)v[6])
	    && (!g->has_l2 || cache_init(&g->l2, v[4], (unsigned)v[5], (unsigned)v[6]));
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	if (info->system_emulation)
		return -1;
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "outfile=", 8) == 0) {
			snprintf(outfile, sizeof outfile, "%s", argv[i] + 8);
		} else if (strncmp(argv[i], "cache=", 6) == 0 && n_geometries < MAX_GEOMETRIES) {
			if (!parse_geometry(argv[i] + 6, &geometries[n_geometries])) {
				fprintf(stderr, "cachesim: bad geometry %s (power-of-two sets and lines)\n", argv[i] + 6);
				return -1;
			}
			n_geometries++;
		} else {
			fprintf(stderr, "cachesim: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	owner_pid = getpid();
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, write_counts, NULL);
	return 0;
}
