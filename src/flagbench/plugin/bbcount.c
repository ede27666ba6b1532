/*
 * flagbench bbcount: a qemu-user TCG plugin that counts how often each translated
 * block runs and writes, at exit, every block that ran with its machine code, so a
 * model (flagbench/model/) can price each block once and multiply.
 *
 * Arguments (qemu -plugin bbcount.so,outfile=PATH):
 *   outfile=PATH  where the lines are written at exit:
 *                   insns TOTAL
 *                   B VADDR COUNT SIZES HEX
 *                 VADDR in hex, COUNT the block's executions, SIZES its instructions'
 *                 lengths in bytes (comma-separated), HEX the block's bytes as fetched.
 *                 A block translated again (after a flush, or a second entry point into
 *                 the same code) has a record of its own; the reader sums equal blocks.
 *
 * Counts are one inline add per block, as insncount.c's: exact for a single-threaded
 * guest and for blocks that run to their end (a block cut short by a fault overcounts;
 * that only happens on a crash). "insns" is the sum of COUNT x instructions, kept by
 * the same adds, so a reader can check its sum against it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu_plugin_api.h"

struct block {
	uint64_t count;                         /* bumped by inline TCG code */
	struct block *next;
	uint64_t vaddr;
	size_t n, bytes;
	unsigned char *sizes;                   /* n instruction lengths */
	unsigned char code[];                   /* `bytes` bytes of machine code */
};

static uint64_t insns;                      /* bumped by inline TCG code */
static char outfile[4096];
static struct block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static bool failed;
static pid_t owner_pid;                     /* forked guest children must not overwrite the file */

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb), bytes = 0;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
	for (size_t i = 0; i < n; i++)
		bytes += qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
	struct block *b = calloc(1, sizeof *b + bytes + n);
	if (!b) {
		failed = true;
		return;
	}
	b->n = n;
	b->bytes = bytes;
	b->sizes = b->code + bytes;
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		size_t size = qemu_plugin_insn_size(insn);
		if (i == 0)
			b->vaddr = qemu_plugin_insn_vaddr(insn);
		memcpy(b->code + at, qemu_plugin_insn_data(insn), size);
		b->sizes[i] = (unsigned char)size;
		at += size;
	}
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}

static void write_blocks(qemu_plugin_id_t id, void *udata)
{
	(void)id; (void)udata;
	if (getpid() != owner_pid || !outfile[0])
		return;
	FILE *f = fopen(outfile, "w");
	if (!f)
		return;
	if (failed)
		fprintf(f, "# incomplete: out of memory\n");
	fprintf(f, "insns %llu\n", (unsigned long long)insns);
	for (struct block *b = blocks; b; b = b->next) {
		if (!b->count)
			continue;
		fprintf(f, "B %llx %llu ", (unsigned long long)b->vaddr, (unsigned long long)b->count);
		for (size_t i = 0; i < b->n; i++)
			fprintf(f, i ? ",%u" : "%u", b->sizes[i]);
		fputc(' ', f);
		for (size_t i = 0; i < b->bytes; i++)
			fprintf(f, "%02x", b->code[i]);
		fputc('\n', f);
	}
	fclose(f);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	if (info->system_emulation)
		return -1;
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "outfile=", 8) == 0) {
			snprintf(outfile, sizeof outfile, "%s", argv[i] + 8);
		} else {
			fprintf(stderr, "bbcount: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	owner_pid = getpid();
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, write_blocks, NULL);
	return 0;
}
