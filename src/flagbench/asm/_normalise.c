/*
 * _normalise.c: asm.disasm's normaliser for the common case, in C. objdump's output is cut into
 * functions (disasm._blocks) and each body normalised (disasm.Normaliser.body), byte for byte
 * as the Python does it; tests/test_normalise.py holds the two together.
 *
 * Why: a vmlinux disassembles to 3 million lines, and the regular expressions, str.replace
 * calls and per-match callbacks of the Python path cost about 0.8 s a side, two thirds of
 * objdump's own time, where `flagbench asm` is to take no longer than one objdump. Here each
 * pass is one scan over a byte buffer.
 *
 * The common case is GNU objdump's output of a file without relocations in the body (linked
 * files), without linker stubs to name and not a riscv object: disasm only comes here then.
 * Python keeps what needs the ELF file: what an address is (Normaliser._described, shared with
 * the Python path, and describe_address for what is not in it yet) and whether a table is a
 * jump table. A body this code does not want to judge (a relocation in it, text that is not
 * ASCII, a description that is not ASCII) goes back raw, and Python normalises it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_padding.h"

struct buf {
	char *p;
	Py_ssize_t len, cap;
};

/* Room for MORE bytes after B's end; 0, or -1 with MemoryError set. */
static int buf_room(struct buf *b, Py_ssize_t more)
{
	Py_ssize_t want;
	char *p;

	if (more <= b->cap - b->len)
		return 0;
	if (more > PY_SSIZE_T_MAX / 2 - b->len) {
		PyErr_NoMemory();
		return -1;
	}
	want = b->len + more;
	if (want < b->cap + b->cap / 2)
		want = b->cap + b->cap / 2;
	if (want < 4096)
		want = 4096;
	p = PyMem_Realloc(b->p, want);
	if (!p) {
		PyErr_NoMemory();
		return -1;
	}
	b->p = p;
	b->cap = want;
	return 0;
}

static int buf_put(struct buf *b, const char *s, Py_ssize_t n)
{
	if (buf_room(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

static void buf_free(struct buf *b)
{
	PyMem_Free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* What a call is given (disasm.Normaliser.fast_context), and its work buffers. */
struct ctx {
	PyObject *described;	/* {(address, is_cmp): description or None} */
	PyObject *describe;	/* describe_address(address, is_cmp) */
	PyObject *jump;		/* is_jump_table(address, function name) */
	int imm;		/* whether immediates are addresses (an executable) */
	unsigned long long lo, hi, mask;	/* addresses are lo..hi, both included */
	struct buf b[2];	/* each pass writes one from the other */
	struct buf pat;		/* "<fname+" */
};

/* The body between passes: P (N bytes) is the caller's text or one of ctx.b. */
struct work {
	struct ctx *c;
	const char *p;
	Py_ssize_t n;
	int next;		/* the ctx.b the next pass writes */
};

/* A pass copying W's text with spans replaced; nothing is written before the first one. */
struct edit {
	struct work *w;
	struct buf *out;
	Py_ssize_t done;	/* the text up to here is in OUT */
	int changed;
};

static void edit_start(struct edit *e, struct work *w)
{
	e->w = w;
	e->out = &w->c->b[w->next];
	e->done = 0;
	e->changed = 0;
}

/* Copy the text up to AT to the output: what replaces the text from AT follows. */
static int edit_to(struct edit *e, Py_ssize_t at)
{
	if (!e->changed) {
		e->out->len = 0;
		e->changed = 1;
	}
	return buf_put(e->out, e->w->p + e->done, at - e->done);
}

/* The rest of the text copied and the output made the body, if anything was replaced. */
static int edit_end(struct edit *e)
{
	struct work *w = e->w;

	if (!e->changed)
		return 0;
	if (buf_put(e->out, w->p + e->done, w->n - e->done) < 0)
		return -1;
	w->p = e->out->p;
	w->n = e->out->len;
	w->next ^= 1;
	return 0;
}

/*
 * The first PAT (M > 0 bytes) in S[FROM:N], found by memchr for its byte at A, one rarely
 * in the text: glibc's memmem took a fifth of the time here on short patterns.
 */
static const char *find_at(const char *s, Py_ssize_t n, Py_ssize_t from, const char *pat, Py_ssize_t m,
			   Py_ssize_t a)
{
	const char *p = s + from + a, *end = s + n - (m - 1 - a);

	while (from <= n - m && p < end) {
		p = memchr(p, pat[a], end - p);
		if (!p)
			return NULL;
		if (p[-a] == pat[0] && (m < 2 || (p[1 - a] == pat[1] && memcmp(p - a + 2, pat + 2, m - 2) == 0)))
			return p - a;
		p++;
	}
	return NULL;
}

static const char *find(const char *s, Py_ssize_t n, Py_ssize_t from, const char *pat, Py_ssize_t m)
{
	return find_at(s, n, from, pat, m, 0);
}

/* [0-9a-f]: each "0x" in the text is followed by a run of them, and this is most of the scanning */
static const unsigned char hex[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
};

static int is_hex(unsigned char c)
{
	return hex[c];
}

/* re's \s on ASCII: \t \n \v \f \r, the four separators 0x1c-0x1f, and space. */
static int is_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* re's \w on ASCII. */
static int is_word(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The "int3" run vmlinux pads with, cut as Normaliser.body does (rstrip, then the next newline). */
static Py_ssize_t int3_cut(const char *s, Py_ssize_t n)
{
	Py_ssize_t k = n;
	const char *nl;

	if (n < 4 || memcmp(s + n - 4, "int3", 4) != 0)
		return n;
	while (k > 0 && (s[k - 1] == '\n' || s[k - 1] == '\t' || s[k - 1] == ' ' || s[k - 1] == 'i' ||
			 s[k - 1] == 'n' || s[k - 1] == 't' || s[k - 1] == '3'))
		k--;
	nl = memchr(s + k, '\n', n - k);
	return nl ? nl - s : n;
}

/*
 * disasm._RIP, 0x[0-9a-f]+\(%rip\)([^\n#]*?)\s*# <([^>\n]*)>, matched at Q: 1 with the spans
 * of its groups and its end, else 0. The lazy group grows only while the whitespace after it
 * cannot be followed by "# <", so each place is looked at once.
 */
static int rip_at(const char *s, Py_ssize_t n, Py_ssize_t q, Py_ssize_t g[4], Py_ssize_t *end)
{
	Py_ssize_t h = q + 2, k, r, e;

	while (h < n && is_hex(s[h]))
		h++;
	if (h == q + 2 || n - h < 6 || memcmp(s + h, "(%rip)", 6) != 0)
		return 0;
	g[0] = k = h + 6;
	for (;;) {
		for (r = k; r < n && is_space(s[r]); r++)
			;
		if (n - r >= 3 && memcmp(s + r, "# <", 3) == 0) {
			for (e = r + 3; e < n && s[e] != '>' && s[e] != '\n'; e++)
				;
			if (e < n && s[e] == '>') {
				g[1] = k;
				g[2] = r + 3;
				g[3] = e;
				*end = e + 1;
				return 1;
			}
		}
		/* a longer group 1 ends in the same whitespace, up to a newline or "#" it cannot hold */
		if (memchr(s + k, '\n', r - k) || r >= n || s[r] == '#')
			return 0;
		k = r + 1;
	}
}

/*
 * "0x10(%rip),%rax  # <x>" -> "<x>(%rip),%rax"; a "-" before it is marked for removal by "\0".
 * Found from each "(%rip)" (rarer than "0x"): the only "0x" that can match before it is the one
 * right before its run of hex digits, and _RIP.sub would try it unless a match went past it.
 */
static int pass_rip(struct work *w)
{
	const char *s = w->p, *x;
	Py_ssize_t n = w->n, q, h = 0, j, g[4], end;
	struct edit e;

	edit_start(&e, w);
	while ((x = find(s, n, h, "(%rip)", 6))) {
		h = x - s;
		for (j = h; j > e.done && is_hex(s[j - 1]); j--)
			;
		q = j - 2;
		if (j == h || q < e.done || s[q] != '0' || s[q + 1] != 'x' || !rip_at(s, n, q, g, &end)) {
			h++;
			continue;
		}
		if (edit_to(&e, q) < 0 || (q > 0 && s[q - 1] == '-' && buf_put(e.out, "\0", 1) < 0) ||
		    buf_put(e.out, "<", 1) < 0 || buf_put(e.out, s + g[2], g[3] - g[2]) < 0 ||
		    buf_put(e.out, ">(%rip)", 7) < 0 || buf_put(e.out, s + g[0], g[1] - g[0]) < 0)
			return -1;
		e.done = h = end;
	}
	return edit_end(&e);
}

/*
 * <fname+ -> <.+ and <fname> -> <.>, one pass: FN (LEN bytes) holds no "<" and does not start
 * with ".+", so their matches cannot overlap and the first replacement makes no new match of
 * the second (each starts at the one "<" it holds), as the two str.replace calls do.
 */
static int pass_fname(struct work *w, const char *fn, Py_ssize_t len)
{
	const char *s = w->p, *x;
	Py_ssize_t n = w->n, q = 0, k;
	struct edit e;

	edit_start(&e, w);
	while ((x = find(s, n, q, "<", 1))) {
		q = x - s;
		k = q + 1 + len;
		if (k < n && (s[k] == '+' || s[k] == '>') && memcmp(s + q + 1, fn, len) == 0) {
			if (edit_to(&e, q) < 0 || buf_put(e.out, s[k] == '+' ? "<.+" : "<.>", 3) < 0)
				return -1;
			e.done = q = k + 1;
		} else {
			q++;
		}
	}
	return edit_end(&e);
}

/* str.replace(PAT, REP): left to right, not overlapping. */
static int pass_replace(struct work *w, const char *pat, Py_ssize_t m, const char *rep, Py_ssize_t rn)
{
	const char *s = w->p, *x;
	Py_ssize_t n = w->n, q = 0;
	struct edit e;

	edit_start(&e, w);
	while ((x = find(s, n, q, pat, m))) {
		q = x - s;
		if (edit_to(&e, q) < 0 || buf_put(e.out, rep, rn) < 0)
			return -1;
		e.done = q = q + m;
	}
	return edit_end(&e);
}

/* The function's own name made "." (<.+0x10>, <.>); FN NULL: it is not in the text. */
static int pass_names(struct work *w, const char *fn, Py_ssize_t len)
{
	struct buf *pat = &w->c->pat;

	if (!fn)
		return 0;
	if (!memchr(fn, '<', len) && !(len >= 2 && fn[0] == '.' && fn[1] == '+'))
		return pass_fname(w, fn, len);
	pat->len = 0;
	if (buf_put(pat, "<", 1) < 0 || buf_put(pat, fn, len) < 0 || buf_put(pat, "+", 1) < 0 ||
	    pass_replace(w, pat->p, pat->len, "<.+", 3) < 0)
		return -1;
	pat->p[pat->len - 1] = '>';
	return pass_replace(w, pat->p, pat->len, "<.>", 3);
}

/* disasm._INDEXED_BY_8, \(,%\w+,8\), at Q. */
static int indexed_by_8(const char *s, Py_ssize_t n, Py_ssize_t q)
{
	Py_ssize_t r;

	if (n - q < 4 || memcmp(s + q, "(,%", 3) != 0 || !is_word(s[q + 3]))
		return 0;
	for (r = q + 3; r < n && is_word(s[r]); r++)
		;
	return n - r >= 3 && memcmp(s + r, ",8)", 3) == 0;
}

/*
 * What Normaliser._address names VALUE (compared against when CMP): a new reference to a str
 * or None, from the shared cache or describe_address. NULL with an exception set.
 */
static PyObject *described(struct ctx *c, unsigned long long value, int cmp)
{
	PyObject *v = PyLong_FromUnsignedLongLong(value), *key = NULL, *desc = NULL;

	if (v)
		key = PyTuple_Pack(2, v, cmp ? Py_True : Py_False);
	if (key) {
		desc = PyDict_GetItemWithError(c->described, key);
		if (desc) {
			Py_INCREF(desc);
		} else if (!PyErr_Occurred()) {
			desc = PyObject_CallFunctionObjArgs(c->describe, v, cmp ? Py_True : Py_False, NULL);
			if (desc && PyDict_SetItem(c->described, key, desc) < 0)
				Py_CLEAR(desc);
		}
	}
	Py_XDECREF(v);
	Py_XDECREF(key);
	return desc;
}

/*
 * disasm._IMMEDIATE, 0x([0-9a-f]{6,16})(?![0-9a-f]), with Normaliser._address on each match:
 * an address in the file becomes what is there. 1 done, 0 when Python is to do this body
 * (a description that is not an ASCII str), -1 with an exception set.
 */
static int pass_immediates(struct work *w, PyObject *fname)
{
	struct ctx *c = w->c;
	const char *s = w->p, *x;
	Py_ssize_t n = w->n, q = 0, h, end, line;
	unsigned long long value;
	unsigned char before;
	PyObject *desc;
	struct edit e;
	int neg, cmp, r;

	edit_start(&e, w);
	while ((x = find(s, n, q, "0x", 2))) {
		q = x - s;
		for (h = q + 2; h < n && is_hex(s[h]); h++)
			;
		if (h - q - 2 < 6 || h - q - 2 > 16) {
			q++;
			continue;
		}
		end = h;
		before = q ? s[q - 1] : ' ';
		if (is_word(before) || before == '.' || before == '+') {	/* isalnum() or "_.+" */
			q = end;
			continue;
		}
		for (value = 0, h = q + 2; h < end; h++)
			value = value << 4 | (unsigned long long)(s[h] <= '9' ? s[h] - '0' : s[h] - 'a' + 10);
		neg = before == '-';
		if (neg)
			value = (0 - value) & c->mask;
		if (value < c->lo || value > c->hi) {
			q = end;
			continue;
		}
		if (indexed_by_8(s, n, end)) {
			PyObject *v = PyLong_FromUnsignedLongLong(value), *yes;

			yes = v ? PyObject_CallFunctionObjArgs(c->jump, v, fname, NULL) : NULL;
			Py_XDECREF(v);
			r = yes ? PyObject_IsTrue(yes) : -1;
			Py_XDECREF(yes);
			if (r < 0)
				return -1;
			if (r) {
				if (edit_to(&e, q) < 0 ||
				    buf_put(e.out, neg ? "\0<jump table>" : "<jump table>", 12 + neg) < 0)
					return -1;
				e.done = q = end;
				continue;
			}
		}
		/* an address compared against is a boundary (a label), one stored or called a function */
		for (line = q; line > 0 && s[line - 1] != '\n'; line--)
			;
		line += s[line] == '\t';
		cmp = n - line >= 3 && memcmp(s + line, "cmp", 3) == 0;
		desc = described(c, value, cmp);
		if (!desc)
			return -1;
		if (desc == Py_None || (PyUnicode_Check(desc) && PyUnicode_GET_LENGTH(desc) == 0)) {
			Py_DECREF(desc);
			q = end;
			continue;
		}
		if (!PyUnicode_Check(desc) || !PyUnicode_IS_ASCII(desc)) {
			Py_DECREF(desc);
			return 0;
		}
		r = edit_to(&e, q) < 0 || (neg && buf_put(e.out, "\0", 1) < 0) || buf_put(e.out, "<", 1) < 0 ||
		    buf_put(e.out, PyUnicode_DATA(desc), PyUnicode_GET_LENGTH(desc)) < 0 || buf_put(e.out, ">", 1) < 0;
		Py_DECREF(desc);
		if (r)
			return -1;
		e.done = q = end;
	}
	return edit_end(&e) < 0 ? -1 : 1;
}

/*
 * Each C, "\0" or "\t", in the text: "-\0" dropped (a "\0" alone stays), a tab at the start of
 * a line dropped, the other tabs made spaces. memchr from one to the next: a line has one tab.
 */
static int pass_char(struct work *w, char c)
{
	const char *s = w->p, *x;
	Py_ssize_t n = w->n, q = 0;
	struct edit e;

	edit_start(&e, w);
	while (q < n && (x = memchr(s + q, c, n - q))) {
		q = x - s;
		if (edit_to(&e, q) < 0)
			return -1;
		if (c == '\0' && q > 0 && s[q - 1] == '-')
			e.out->len--;	/* the "-" just copied: it is never a C itself */
		else if ((c == '\0' || (q > 0 && s[q - 1] != '\n')) && buf_put(e.out, c ? " " : "\0", 1) < 0)
			return -1;
		e.done = ++q;
	}
	return edit_end(&e);
}

/* body.replace("-\0", ""), then .replace("\n\t", "\n").removeprefix("\t").replace("\t", " ") */
static int pass_tabs(struct work *w)
{
	if (memchr(w->p, '\0', w->n) && pass_char(w, '\0') < 0)
		return -1;
	return pass_char(w, '\t');
}

static PyObject *ascii_str(const char *s, Py_ssize_t n)
{
	PyObject *u = PyUnicode_New(n, 127);

	if (u && n)
		memcpy(PyUnicode_DATA(u), s, n);
	return u;
}

/* disasm._without_trailing_padding: the length of W's text without its last empty or padding lines. */
static Py_ssize_t padding_cut(struct work *w)
{
	const char *s = w->p, *nl;
	Py_ssize_t n = w->n, cut;

	while (n > 0) {
		nl = memrchr(s, '\n', n);
		cut = nl ? nl - s : -1;
		if (n - cut - 1 > 0 && !padding_line(s + cut + 1, n - cut - 1))
			break;
		n = cut > 0 ? cut : 0;
	}
	return n;
}

/*
 * Normaliser.body of the ASCII text S (N bytes) of function FNAME (FN, FNLEN its UTF-8 bytes;
 * FN NULL: not ASCII, so not in S): a new str, None when Python is to do it, or NULL with an
 * exception set.
 */
static PyObject *normalise(struct ctx *c, const char *s, Py_ssize_t n, PyObject *fname, const char *fn,
			   Py_ssize_t fnlen)
{
	struct work w = { .c = c, .p = s, .n = int3_cut(s, n), .next = 0 };
	int r;

	if (find_at(s, n, 0, "\tR_", 3, 1))
		Py_RETURN_NONE;
	if (pass_rip(&w) < 0)
		return NULL;
	if (pass_names(&w, fn, fnlen) < 0)
		return NULL;
	if (c->imm) {
		r = pass_immediates(&w, fname);
		if (r <= 0)
			return r < 0 ? NULL : Py_NewRef(Py_None);
	}
	if (pass_tabs(&w) < 0)
		return NULL;
	return ascii_str(w.p, padding_cut(&w));
}

/* CTX, disasm.Normaliser.fast_context(): 0, or -1 with an exception set. */
static int ctx_from(PyObject *tuple, struct ctx *c)
{
	memset(c, 0, sizeof(*c));
	return PyArg_ParseTuple(tuple, "O!OOpKKK;context: (described, describe, jump, imm, lo, hi, mask)",
				&PyDict_Type, &c->described, &c->describe, &c->jump, &c->imm, &c->lo,
				&c->hi, &c->mask) ? 0 : -1;
}

static void ctx_free(struct ctx *c)
{
	buf_free(&c->b[0]);
	buf_free(&c->b[1]);
	buf_free(&c->pat);
}

static int is_ascii(const char *s, Py_ssize_t n)
{
	Py_ssize_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			return 0;
	return 1;
}

PyDoc_STRVAR(body_doc,
"body(text, fname, context) -> str or None\n\n"
"Normaliser.body(TEXT, FNAME) for a Normaliser whose fast_context() is CONTEXT; None where\n"
"the Python is to do it (a relocation in TEXT, text that is not ASCII).");

static PyObject *body(PyObject *self, PyObject *args)
{
	PyObject *text, *fname, *tuple, *out;
	const char *fn;
	Py_ssize_t fnlen;
	struct ctx c;

	if (!PyArg_ParseTuple(args, "UUO!", &text, &fname, &PyTuple_Type, &tuple))
		return NULL;
	if (!PyUnicode_IS_ASCII(text))
		Py_RETURN_NONE;
	/* a name that is not ASCII is nowhere in ASCII text */
	fn = PyUnicode_IS_ASCII(fname) ? PyUnicode_DATA(fname) : NULL;
	fnlen = PyUnicode_GET_LENGTH(fname);
	if (ctx_from(tuple, &c) < 0)
		return NULL;
	out = normalise(&c, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), fname, fn, fnlen);
	ctx_free(&c);
	return out;
}

/* One call of blocks(): objdump's text and the function being gathered. */
struct blocks {
	struct ctx c;
	const char *s;		/* the text's UTF-8 bytes */
	Py_ssize_t n;
	int ascii;		/* all of it, and the body carried in from the call before */
	PyObject *out;		/* [(section, name, text, done)] */
	PyObject *section;
	PyObject *name;		/* the function being gathered, NULL before the first */
	struct buf fname;	/* its UTF-8 bytes */
	const char *part;	/* its body, while that is one part of the text... */
	Py_ssize_t partlen;
	int joined;		/* ...else gathered here, its parts joined by newlines */
	struct buf body;
};

static PyObject *text_str(struct blocks *b, const char *s, Py_ssize_t n)
{
	return b->ascii ? ascii_str(s, n) : PyUnicode_DecodeUTF8(s, n, "surrogatepass");
}

/* The function gathered so far appended to the output, normalised if it can be here. */
static int flush(struct blocks *b)
{
	const char *s = b->joined ? b->body.p : b->part;
	Py_ssize_t n = b->joined ? b->body.len : b->partlen;
	PyObject *text = Py_None, *item;
	int rc;

	if (!b->name)
		return 0;
	Py_INCREF(text);
	if (b->ascii || is_ascii(s, n)) {
		Py_SETREF(text, normalise(&b->c, s, n, b->name, b->fname.p ? b->fname.p : "", b->fname.len));
		if (!text)
			return -1;
	}
	item = text == Py_None ? Py_BuildValue("(OONO)", b->section, b->name, text_str(b, s, n), Py_False) :
				 Py_BuildValue("(OOOO)", b->section, b->name, text, Py_True);
	Py_DECREF(text);
	if (!item)
		return -1;
	rc = PyList_Append(b->out, item);
	Py_DECREF(item);
	Py_CLEAR(b->name);
	b->joined = 0;
	return rc;
}

/* PART joined to the body being gathered (a local label's block, as _blocks does). */
static int join(struct blocks *b, const char *part, Py_ssize_t n)
{
	if (!b->joined) {
		b->body.len = 0;
		if (buf_put(&b->body, b->part, b->partlen) < 0)
			return -1;
		b->joined = 1;
	}
	return buf_put(&b->body, "\n", 1) < 0 || buf_put(&b->body, part, n) < 0 ? -1 : 0;
}

static int is_local_label(const char *s, Py_ssize_t n)
{
	return (n >= 2 && s[0] == '.' && s[1] == 'L') || (n >= 1 && s[0] == '$' && !(n >= 2 && s[1] == '$'));
}

#define SECTION_HEAD "Disassembly of section "

/* One block of objdump's output (what lies between blank lines), as _blocks reads it. */
static int block(struct blocks *b, const char *s, Py_ssize_t n)
{
	const char *nl, *lt, *body;
	Py_ssize_t head, blen, k;

	while (n > 0 && *s == '\n')
		s++, n--;
	nl = memchr(s, '\n', n);
	head = nl ? nl - s : n;
	body = nl ? nl + 1 : s + n;
	blen = s + n - body;
	if (head >= (Py_ssize_t)strlen(SECTION_HEAD) && memcmp(s, SECTION_HEAD, strlen(SECTION_HEAD)) == 0) {
		if (flush(b) < 0)
			return -1;
		for (k = head; k > (Py_ssize_t)strlen(SECTION_HEAD) && s[k - 1] == ':'; k--)
			;
		Py_SETREF(b->section, text_str(b, s + strlen(SECTION_HEAD), k - strlen(SECTION_HEAD)));
		return b->section ? 0 : -1;
	}
	/* _HEADER, <(.+)>:$: from the first "<" to a ">:" that ends the line, something between */
	lt = memchr(s, '<', head);
	if (!lt || head < 2 || s[head - 2] != '>' || s[head - 1] != ':' || lt + 1 >= s + head - 2)
		return 0;
	lt++;
	k = s + head - 2 - lt;
	if (is_local_label(lt, k) && b->name)
		return join(b, body, blen);
	if (flush(b) < 0)
		return -1;
	b->fname.len = 0;
	if (buf_put(&b->fname, lt, k) < 0 || !(b->name = text_str(b, lt, k)))
		return -1;
	b->part = body;
	b->partlen = blen;
	return 0;
}

/* STATE, [section, name, body so far], read into B; 0, or -1 with an exception set. */
static int state_in(struct blocks *b, PyObject *state)
{
	PyObject *name, *bytes;
	int rc;

	if (PyList_GET_SIZE(state) != 3 || !PyUnicode_Check(PyList_GET_ITEM(state, 0)) ||
	    !PyUnicode_Check(PyList_GET_ITEM(state, 2))) {
		PyErr_SetString(PyExc_TypeError, "state: [section, name or None, body]");
		return -1;
	}
	b->section = Py_NewRef(PyList_GET_ITEM(state, 0));
	name = PyList_GET_ITEM(state, 1);
	if (name == Py_None)
		return 0;
	if (!PyUnicode_Check(name)) {
		PyErr_SetString(PyExc_TypeError, "state: [section, name or None, body]");
		return -1;
	}
	b->name = Py_NewRef(name);
	b->joined = 1;
	/* text from before that is not ASCII: this call's bytes are UTF-8, not all ASCII */
	b->ascii &= PyUnicode_IS_ASCII(name) && PyUnicode_IS_ASCII(PyList_GET_ITEM(state, 2));
	bytes = PyUnicode_AsEncodedString(name, "utf-8", "surrogatepass");
	rc = bytes ? buf_put(&b->fname, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes)) : -1;
	Py_XDECREF(bytes);
	if (rc < 0)
		return -1;
	bytes = PyUnicode_AsEncodedString(PyList_GET_ITEM(state, 2), "utf-8", "surrogatepass");
	rc = bytes ? buf_put(&b->body, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes)) : -1;
	Py_XDECREF(bytes);
	return rc;
}

static int state_out(struct blocks *b, PyObject *state)
{
	PyObject *body;

	if (!b->name)
		body = PyUnicode_New(0, 0);
	else if (b->joined)
		body = text_str(b, b->body.p, b->body.len);
	else
		body = text_str(b, b->part, b->partlen);
	if (!body)
		return -1;
	PyList_SetItem(state, 2, body);
	PyList_SetItem(state, 0, Py_NewRef(b->section));
	PyList_SetItem(state, 1, Py_NewRef(b->name ? b->name : Py_None));
	return 0;
}

/* The number of characters in the UTF-8 bytes S (N of them). */
static Py_ssize_t chars(const char *s, Py_ssize_t n)
{
	Py_ssize_t i, k = 0;

	for (i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

PyDoc_STRVAR(blocks_doc,
"blocks(text, state, final, context, start=0) -> (functions, used)\n\n"
"disasm._blocks over objdump's TEXT, each body normalised as Normaliser.body does with\n"
"CONTEXT (Normaliser.fast_context()): functions is [(section, name, text, done)], text the\n"
"raw body where done is False (Python is to normalise it). TEXT is read up to its last blank\n"
"line unless FINAL; TEXT[used:] is to come again in front of the next text. STATE, [section,\n"
"name or None, body so far], starts as ['', None, ''] and carries the function being gathered\n"
"from call to call; FINAL ends it. No blank line starts before START: the text that came again\n"
"holds none, but its last newline.");

static PyObject *blocks(PyObject *self, PyObject *args)
{
	PyObject *text, *state, *tuple, *bytes = NULL, *out = NULL;
	struct blocks b;
	const char *sep;
	Py_ssize_t pos = 0, used, from = 0;
	int final;

	if (!PyArg_ParseTuple(args, "UO!pO!|n", &text, &PyList_Type, &state, &final, &PyTuple_Type, &tuple, &from))
		return NULL;
	memset(&b, 0, sizeof(b));
	if (ctx_from(tuple, &b.c) < 0)
		return NULL;
	b.ascii = PyUnicode_IS_ASCII(text);
	if (b.ascii) {
		b.s = PyUnicode_DATA(text);
		b.n = PyUnicode_GET_LENGTH(text);
	} else {	/* surrogatepass: the text comes back as it went */
		bytes = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
		if (!bytes)
			goto done;
		b.s = PyBytes_AS_STRING(bytes);
		b.n = PyBytes_GET_SIZE(bytes);
	}
	if (!(b.out = PyList_New(0)) || state_in(&b, state) < 0)
		goto done;
	/* a block that is still coming was searched the call before: a function megabytes long */
	from = PyUnicode_IS_ASCII(text) && from > 0 ? Py_MIN(from, b.n) : 0;
	for (;;) {
		sep = find(b.s, b.n, Py_MAX(pos, from), "\n\n", 2);
		if (!sep && !final)
			break;
		if (block(&b, b.s + pos, (sep ? sep : b.s + b.n) - (b.s + pos)) < 0)
			goto done;
		if (!sep)
			break;
		pos = sep - b.s + 2;
	}
	if ((final && flush(&b) < 0) || state_out(&b, state) < 0)
		goto done;
	used = final ? PyUnicode_GET_LENGTH(text) : PyUnicode_IS_ASCII(text) ? pos : chars(b.s, pos);
	out = Py_BuildValue("(On)", b.out, used);
done:
	Py_XDECREF(b.out);
	Py_XDECREF(b.section);
	Py_XDECREF(b.name);
	Py_XDECREF(bytes);
	buf_free(&b.fname);
	buf_free(&b.body);
	ctx_free(&b.c);
	return out;
}

PyDoc_STRVAR(padding_doc,
"is_padding(line) -> bool\n\n"
"Whether model.PADDING matches LINE (ASCII, no newline), as the C sees it; PADDING is the\n"
"pattern it implements.");

static PyObject *padding(PyObject *self, PyObject *line)
{
	if (!PyUnicode_Check(line) || !PyUnicode_IS_ASCII(line)) {
		PyErr_SetString(PyExc_TypeError, "an ASCII str");
		return NULL;
	}
	return PyBool_FromLong(padding_line(PyUnicode_DATA(line), PyUnicode_GET_LENGTH(line)));
}

static PyMethodDef methods[] = {
	{ "is_padding", padding, METH_O, padding_doc },
	{ "body", body, METH_VARARGS, body_doc },
	{ "blocks", blocks, METH_VARARGS, blocks_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "flagbench.asm._normalise",
	.m_doc = "asm.disasm's block splitting and body normalising for the common case, in C.",
	.m_size = -1,
	.m_methods = methods,
};

PyMODINIT_FUNC PyInit__normalise(void)
{
	PyObject *m = PyModule_Create(&module);

	if (m && PyModule_AddStringConstant(m, "PADDING", PADDING_PATTERN) < 0)
		Py_CLEAR(m);
	return m;
}
