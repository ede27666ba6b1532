/*
 * The blocks a pair of Summary tables prints (part of the flagbench.elf._symtab extension):
 * bloat-o-meter's, byte for byte (bom_text), and the text format's symbol table (text_block),
 * from their rows in bloat-o-meter's order. Apart from _summary.c, which fills and compares
 * the tables, so that each file reads whole.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "_summary.h"

/* One row of bom_text / text_block: a name in OLD, NEW or both with different sizes (-1: not on that side). */
struct row {
	const char *name;
	Py_ssize_t len;
	long long old, new, delta, foot;	/* FOOT: the footprint's delta, LLONG_MIN when not shown */
};

/* bloat-o-meter's order: delta, then name, both descending (names compared as bytes: ASCII here). */
static int row_order(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	int c;

	if (a->delta != b->delta)
		return a->delta > b->delta ? -1 : 1;
	c = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);
	if (c)
		return -c;
	return a->len > b->len ? -1 : a->len < b->len;
}

/* Whether S is printable ASCII (PRINTABLE), or ASCII: there bytes, code points and columns agree. */
static int ascii(const char *s, Py_ssize_t n, int printable)
{
	Py_ssize_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x7f + !printable || (printable && (unsigned char)s[i] < 0x20))
			return 0;
	return 1;
}

struct rows {
	struct row *row;
	Py_ssize_t n, add, remove, grow, shrink;
	unsigned long long total_old, total_new, up, down;
};

/* The footprint cell of a row (size.render._text): a code symbol's footprint delta when it has one. */
static long long foot_delta(struct entry *a, struct entry *b, const uint8_t *code)
{
	uint8_t letter = b ? b->letter : a->letter;
	unsigned long long fo = a ? a->foot : 0, fn = b ? b->foot : 0;

	if (!code[letter] || (!fo && !fn))
		return LLONG_MIN;
	return (long long)fn - (long long)fo;
}

/* diff()'s rows, unfiltered, in bloat-o-meter's order; 0, or -1 when a name is not (printable) ASCII
 * (R->row NULL) or memory ran out (an exception set). */
static int collect_rows(Summary *old, Summary *new, struct rows *r, int printable, const uint8_t *code)
{
	Py_ssize_t i;

	Py_ssize_t j = 0;
	char *found;

	memset(r, 0, sizeof(*r));
	r->row = PyMem_RawMalloc(sizeof(*r->row) * (old->n + new->n + 1));
	found = PyMem_RawCalloc(new->n + 1, 1);
	if (!r->row || !found) {
		PyMem_RawFree(r->row);
		PyMem_RawFree(found);
		r->row = NULL;
		return PyErr_NoMemory(), -1;
	}
	for (i = 0; i < old->n; i++) {
		struct entry *a = &old->entries[i], *b = j < new->n ? &new->entries[j] : NULL;

		/* Two builds of one tree list their names in much the same order: NEW's entry after the
		 * last match is tried before the hash table (whose probes, twice per name, were half
		 * of this block's instructions on a vmlinux pair). Each name of NEW found is marked,
		 * so that NEW's own pass below needs no lookup at all. */
		if (!b || b->hash != a->hash || b->len != a->len || memcmp(new->arena + b->off, old->arena + a->off, a->len))
			b = summary_find(new, old->arena + a->off, a->len, a->hash);
		if (b) {
			j = b - new->entries + 1;
			found[j - 1] = 1;
		}
		r->total_old += a->size;
		if (b && b->size == a->size)
			continue;
		if (!b) {
			r->remove++;
			r->down += a->size;
		} else if (b->size > a->size) {
			r->grow++;
			r->up += b->size - a->size;
		} else {
			r->shrink++;
			r->down += a->size - b->size;
		}
		r->row[r->n++] = (struct row){ old->arena + a->off, a->len, (long long)a->size, b ? (long long)b->size : -1,
					       (b ? (long long)b->size : 0) - (long long)a->size, foot_delta(a, b, code) };
	}
	for (i = 0; i < new->n; i++) {
		struct entry *b = &new->entries[i];

		r->total_new += b->size;
		if (found[i])
			continue;
		r->add++;
		r->up += b->size;
		r->row[r->n++] = (struct row){ new->arena + b->off, b->len, -1, (long long)b->size, (long long)b->size,
					       foot_delta(NULL, b, code) };
	}
	PyMem_RawFree(found);
	for (i = 0; i < r->n; i++)
		if (!ascii(r->row[i].name, r->row[i].len, printable)) {
			PyMem_RawFree(r->row);
			r->row = NULL;
			return -1;
		}
	qsort(r->row, r->n, sizeof(*r->row), row_order);
	return 0;
}

/* Append " " and V right-aligned in WIDTH columns, with its sign when PLUS ("%+*lld"; sprintf was a
 * fifth of `flagbench size --format=bom` on a pair of shared libraries). */
static char *int_cell(char *p, long long v, int width, int plus)
{
	char digits[24];
	int n = 0, len;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do {
		digits[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0 || plus)
		digits[n++] = v < 0 ? '-' : '+';
	*p++ = ' ';
	for (len = n; len < width; len++)
		*p++ = ' ';
	while (n)
		*p++ = digits[--n];
	return p;
}

/* Append "%7s" of V (or "-" when V < 0) to P. */
static char *size_cell(char *p, long long v)
{
	if (v >= 0)
		return int_cell(p, v, 7, 0);
	memcpy(p, "       -", 8);
	return p + 8;
}

/* The block bom_text and text_block print: TEXT adds the footprint column and "Symbol" for the label. */
static PyObject *block(Summary *old, PyObject *args, int text)
{
	Summary *new;
	const char *label = "Symbol", *letters = "";
	uint8_t code[256] = { 0 };
	Py_ssize_t i, width;
	struct rows r;
	PyObject *out = NULL;
	char *buf = NULL, *p;
	double percent;

	if (!PyArg_ParseTuple(args, text ? "O!s" : "O!s", &SummaryType, &new, text ? &letters : &label))
		return NULL;
	for (; *letters; letters++)	/* not the summaries' own: Summary.loads leaves those empty */
		code[(uint8_t)*letters] = 1;
	if (collect_rows(old, new, &r, text, code) < 0)
		return r.row || PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
	width = 1024 + (Py_ssize_t)strlen(label);	/* the three fixed lines */
	for (i = 0; i < r.n; i++)
		width += r.row[i].len + 100;
	buf = PyMem_RawMalloc(width);
	if (!buf) {
		PyErr_NoMemory();
		goto done;
	}
	p = buf;
	p += sprintf(p, "add/remove: %zd/%zd grow/shrink: %zd/%zd up/down: %llu/%lld (%lld)\n", r.add, r.remove,
		     r.grow, r.shrink, r.up, -(long long)r.down, (long long)r.up - (long long)r.down);
	p += sprintf(p, text ? "%-40s %7s %7s %7s %10s\n" : "%-40s %7s %7s %7s\n", label, "old", "new", "delta",
		     "footprint");
	for (i = 0; i < r.n; i++) {
		struct row *w = &r.row[i];

		memcpy(p, w->name, w->len);
		p += w->len;
		if (w->len < 40) {
			memset(p, ' ', 40 - w->len);
			p += 40 - w->len;
		}
		p = size_cell(p, w->old);
		p = size_cell(p, w->new);
		p = int_cell(p, w->delta, 7, 1);
		if (text && w->foot == LLONG_MIN) {
			memset(p, ' ', 11);
			p += 11;
		} else if (text) {
			p = int_cell(p, w->foot, 10, 1);
		}
		*p++ = '\n';
	}
	percent = r.total_old ? (double)((long long)r.total_new - (long long)r.total_old) * 100.0 / (double)r.total_old
			      : 0;
	p += sprintf(p, "Total: Before=%llu, After=%llu, chg %+.2f%%\n", r.total_old, r.total_new, percent);
	out = PyUnicode_DecodeASCII(buf, p - buf, "strict");
	if (out && text)
		Py_SETREF(out, Py_BuildValue("(OKK)", out, r.total_old, r.total_new));
done:
	PyMem_RawFree(r.row);
	PyMem_RawFree(buf);
	return out;
}

const char bom_text_doc[] =
"old.bom_text(new, label) -> str, or None\n\n"
"bloat-o-meter's print_result() block for OLD vs NEW, byte for byte: what size.rules.bom_text\n"
"prints of diff()'s rows in its order, without a filter or --top. None when a row's name is not\n"
"ASCII (Python sorts and pads by code points: size.rules does it).";

PyObject *summary_bom_text(Summary *old, PyObject *args)
{
	return block(old, args, 0);
}

const char text_block_doc[] =
"old.text_block(new, code_letters) -> (str, total_old, total_new), or None\n\n"
"The symbol table of size.render's text format (from the add/remove line to the Total line), as\n"
"it prints it without a filter or --top, and the two totals; a footprint for the rows of\n"
"CODE_LETTERS. None when a row's name is not\n"
"printable ASCII (size.render escapes and pads it).";

PyObject *summary_text_block(Summary *old, PyObject *args)
{
	return block(old, args, 1);
}
