/*
 * _mix.c: the instruction mix of x86-64 code (asm.mix's `mix` and `mix_sum`) in C.
 *
 * Why C: one side of `flagbench asm` on a vmlinux mixes 720,000 lines (123,000 distinct,
 * 19,000 distinct shapes), and in Python counting them, making their shapes and classifying
 * those took about a second, more than any other part of the side's Python. Here a Mixer keeps
 * a table of the lines it has seen (their bytes, no str objects), each with what a mix counts
 * of it and the record of its shape: a line seen before costs a hash and a compare, a new line
 * its shape, and only a new shape is parsed and classified (0.1 s for the side, cold).
 *
 * The rules are asm.mix's and asm.isa's (_SYMBOL, _NUMBER, model.PADDING, parse,
 * split_operands, isa.x86), ported one by one for ASCII text; tests hold each function here
 * to its Python original, on real objects and on generated lines. A line that is not ASCII
 * (the regular expressions' \w and str.strip know Unicode) goes to a Python callback, whose
 * answer is kept like any other. What this does not take (a line holding a newline, a str
 * with no UTF-8 form, a call while the Mixer is busy) makes the call return None, and the
 * caller mixes in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_padding.h"

#define SLICE_WINDOW 12		/* asm.mix.SLICE_WINDOW */
#define MAX_WIDTH 255		/* widths are kept in a byte; x86's are 1 to 64 */

/* What a shape is: its code. */
#define NOT_CODE 0		/* a label or data (mix.NOT_CODE) */
#define PAD 1			/* alignment padding (mix.PAD) */
#define FIRST_REC 2		/* 2 + the index of its record */
#define MAX_RECS (1 << 30)

/* A line's value in the lines table: its code, and what a mix counts of it, so that counting
 * a line reads no record (a vmlinux side counts 700,000) unless a call through registers is
 * sliced. */
#define V_STUB 1			/* it holds "<stub:" (a direct call through a linker stub) */
#define V_LOAD(v) (((v) >> 1) & 0xff)
#define V_STORE(v) (((v) >> 9) & 0xff)
#define V_BRANCH (1 << 17)
#define V_CALL(v) (((v) >> 18) & 3)
#define V_SLICED (1 << 20)		/* a call through registers */
#define V_STROP(v) (((v) >> 21) & 0x3ff)	/* its string operation's number + 1, 0: none */
#define STROP_MANY 0x3ff		/* ... or look in its record */
#define V_CODE(v) ((v) >> 32)

/* A piece of a line: bytes, not NUL-terminated. */
struct sl {
	const char *p;
	Py_ssize_t n;
};

static struct sl sl_at(const char *p, Py_ssize_t n)
{
	struct sl s = { p, n };

	return s;
}

static struct sl sl_mid(struct sl s, Py_ssize_t from, Py_ssize_t to)
{
	return sl_at(s.p + from, to - from);
}

/* The helpers below take a literal (its length known when compiling: a side's new lines go
 * through a dozen of them each), the _z forms any string. */
#define LIT(lit) "" lit "", sizeof("" lit "") - 1
#define sl_eq(s, lit) sl_eq_n(s, LIT(lit))
#define sl_starts(s, lit) sl_starts_n(s, LIT(lit))
#define sl_ends(s, lit) sl_ends_n(s, LIT(lit))
#define sl_find(s, lit) sl_find_n(s, LIT(lit))
#define sl_rfind(s, lit) sl_rfind_n(s, LIT(lit))
#define sl_eq_z(s, z) sl_eq_n(s, z, strlen(z))
#define sl_starts_z(s, z) sl_starts_n(s, z, strlen(z))

static int sl_eq_n(struct sl s, const char *lit, size_t n)
{
	return (size_t)s.n == n && memcmp(s.p, lit, n) == 0;
}

static int sl_starts_n(struct sl s, const char *lit, size_t n)
{
	return (size_t)s.n >= n && memcmp(s.p, lit, n) == 0;
}

static int sl_ends_n(struct sl s, const char *lit, size_t n)
{
	return (size_t)s.n >= n && memcmp(s.p + s.n - n, lit, n) == 0;
}

static int sl_has(struct sl s, char c)
{
	return s.n > 0 && memchr(s.p, c, s.n) != NULL;
}

/* The first index of LIT (N bytes, N > 0) in S, -1 when it is not there. */
static Py_ssize_t sl_find_n(struct sl s, const char *lit, size_t n)
{
	const char *p = s.p, *end = s.p + s.n;

	while ((size_t)(end - p) >= n && (p = memchr(p, lit[0], (size_t)(end - p) - n + 1)) != NULL) {
		if (memcmp(p, lit, n) == 0)
			return p - s.p;
		p++;
	}
	return -1;
}

static Py_ssize_t sl_rfind_n(struct sl s, const char *lit, size_t n)
{
	Py_ssize_t i;

	for (i = s.n - (Py_ssize_t)n; i >= 0; i--)
		if (s.p[i] == lit[0] && memcmp(s.p + i, lit, n) == 0)
			return i;
	return -1;
}

static Py_ssize_t sl_count(struct sl s, Py_ssize_t upto, char c)
{
	Py_ssize_t i, k = 0;

	for (i = 0; i < upto; i++)
		k += s.p[i] == c;
	return k;
}

/* str.isspace on ASCII: \t \n \v \f \r, \x1c-\x1f and the space. */
static int py_space(unsigned char c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
}

static struct sl strip(struct sl s)
{
	while (s.n > 0 && py_space((unsigned char)s.p[0]))
		s.p++, s.n--;
	while (s.n > 0 && py_space((unsigned char)s.p[s.n - 1]))
		s.n--;
	return s;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_lower_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

/* \w on ASCII */
static int is_word(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int all_ascii(const char *s, Py_ssize_t n)
{
	Py_ssize_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			return 0;
	return 1;
}

/* ---------------------------------------------------------------- shapes (mix._SYMBOL, _NUMBER) */

/*
 * Where the symbol starting with the '<' at S[I] ends, 0 when none does there:
 * <"(?:[^"\\\n]|\\.)*">|<[^<>$\n]*>. The first branch reads its string literal one way only
 * (a backslash always takes the character after it), so it matches where that reading stops
 * at `">`.
 */
static Py_ssize_t symbol_end(const char *s, Py_ssize_t n, Py_ssize_t i)
{
	Py_ssize_t j;

	if (i + 1 < n && s[i + 1] == '"') {
		for (j = i + 2; j < n && s[j] != '"' && s[j] != '\n'; j++) {
			if (s[j] == '\\') {
				if (j + 1 >= n || s[j + 1] == '\n')
					break;
				j++;
			}
		}
		if (j + 1 < n && s[j] == '"' && s[j + 1] == '>')
			return j + 2;
	}
	for (j = i + 1; j < n && s[j] != '<' && s[j] != '>' && s[j] != '$' && s[j] != '\n'; j++)
		;
	return j < n && s[j] == '>' ? j + 1 : 0;
}

/* Where the number starting at S[I] ends, 0 when none does (the look-behind is the caller's):
 * -?(?:[0-9][0-9a-fx]*|[0-9a-f]+(?=\()) */
static Py_ssize_t number_end(const char *s, Py_ssize_t n, Py_ssize_t i)
{
	Py_ssize_t j = i < n && s[i] == '-' ? i + 1 : i, e;

	if (j < n && is_digit(s[j])) {
		for (e = j + 1; e < n && (is_lower_hex(s[e]) || s[e] == 'x'); e++)
			;
		return e;
	}
	for (e = j; e < n && is_lower_hex(s[e]); e++)
		;
	return e > j && e < n && s[e] == '(' ? e : 0;
}

/*
 * The shape of the line S (N bytes, ASCII) into OUT, which has room for 2 * N bytes (the two
 * passes, each no longer than its input); its length, the shape at OUT. That is
 * _NUMBER.sub("0", _SYMBOL.sub("<>", line)): symbols blanked, then numbers.
 */
static Py_ssize_t make_shape(const char *s, Py_ssize_t n, char *out, const char **shape)
{
	char *mid = out, *end = out + n;
	Py_ssize_t i = 0, m = 0, k = 0, e;

	while (i < n) {
		if (s[i] == '<' && (e = symbol_end(s, n, i)) > 0) {
			mid[m++] = '<';
			mid[m++] = '>';
			i = e;
		} else {
			mid[m++] = s[i++];
		}
	}
	/* the look-behind (?<![\w.]) reads the input of this pass, not what it wrote */
	for (i = 0; i < m;) {
		if ((i == 0 || !(is_word(mid[i - 1]) || mid[i - 1] == '.')) && (e = number_end(mid, m, i)) > 0) {
			end[k++] = '0';
			i = e;
		} else {
			end[k++] = mid[i++];
		}
	}
	*shape = end;
	return k;
}

/* ---------------------------------------------------------------- padding (model.PADDING) */

/* model.PADDING.match(S): _padding.h's, shared with _normalise.c. */
static int is_padding(struct sl s)
{
	return padding_line(s.p, s.n);
}

/* ---------------------------------------------------------------- parse (mix.parse, split_operands) */

struct parsed {
	struct sl mn, note;
	struct sl *ops;		/* room for as many as the line has bytes, and one */
	Py_ssize_t nops;
};

static void add_operand(struct parsed *p, struct sl part)
{
	part = strip(part);
	if (part.n)
		p->ops[p->nops++] = part;
}

static int opens(char c)
{
	return c == '(' || c == '[' || c == '{' || c == '<';
}

static int closes(char c)
{
	return c == ')' || c == ']' || c == '}' || c == '>';
}

/* split_operands: on commas outside (), [], {}, <> and quotes, when any of those opens. */
static void split_operands(struct sl ops, struct parsed *p)
{
	Py_ssize_t i, start = 0;
	int depth = 0, quote = 0, nested = 0;

	p->nops = 0;
	for (i = 0; i < ops.n && !nested; i++)
		nested = opens(ops.p[i]) || ops.p[i] == '"';
	for (i = 0; i < ops.n; i++) {
		char ch = ops.p[i];

		if (nested) {
			if (ch == '"') {
				quote = !quote;
				continue;
			}
			if (!quote && opens(ch)) {
				depth++;
				continue;
			}
			if (!quote && closes(ch)) {
				depth--;
				continue;
			}
		}
		if (ch == ',' && depth == 0 && !quote) {
			add_operand(p, sl_mid(ops, start, i));
			start = i + 1;
		}
	}
	add_operand(p, sl_mid(ops, start, ops.n));
}

/* parse(LINE, "#"): 0 for a label or data (None), else 1 with P filled. */
static int parse(struct sl line, struct parsed *p)
{
	static const char *const data[] = { ".word", ".short", ".byte", ".long", ".quad" };
	struct sl s, ops;
	Py_ssize_t at, k;

	if (line.n == 0 || line.p[line.n - 1] == ':')
		return 0;
	for (k = 0; k < 5; k++)
		if (sl_starts_z(line, data[k]))
			return 0;
	s = strip(line);
	at = sl_find(s, " ");
	p->mn = at < 0 ? s : sl_mid(s, 0, at);
	ops = strip(at < 0 ? sl_at(s.p + s.n, 0) : sl_mid(s, at + 1, s.n));
	at = sl_find(ops, " #");
	if (at >= 0 && sl_count(ops, at, '<') == sl_count(ops, at, '>'))
		ops.n = at;
	p->note = sl_at(ops.p + ops.n, 0);
	if (sl_ends(ops, ">") && (at = sl_rfind(ops, " <")) >= 0 &&
	    sl_count(ops, at, '<') == sl_count(ops, at, '>')) {
		p->note = sl_mid(ops, at + 1, ops.n);
		ops.n = at;
	}
	split_operands(ops, p);
	return 1;
}

/* ---------------------------------------------------------------- classify (isa.x86) */

struct x86 {
	struct sl mn, *ops;
	Py_ssize_t nops;
	int load, store;	/* width, 0: none (x86 makes one of each at most) */
	int call;		/* 0, 1 direct, 2 indirect */
	int branch, symbolic, rep, string_op;
	struct sl *regs;	/* target_regs, then defs, then uses: canonical, repeats and all */
	Py_ssize_t ntarget, ndefs, nuses;
};

static int in_list(struct sl s, const char *const *list)
{
	for (; *list; list++)
		if (sl_eq_z(s, *list))
			return 1;
	return 0;
}

static int starts_any(struct sl s, const char *const *list)
{
	for (; *list; list++)
		if (sl_starts_z(s, *list))
			return 1;
	return 0;
}

static const char *const x86_prefix[] = { "lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd",
					  "data16", "cs", "ds", "es", "ss", "fs", "gs", "addr32", "rex", "rex.W",
					  "xacquire", "xrelease", NULL };
static const char *const x86_suffixable[] = {
	"mov", "add", "sub", "and", "or", "xor", "cmp", "test", "adc", "sbb", "inc", "dec", "neg", "not", "push",
	"pop", "shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "imul", "mul", "div", "idiv", "xchg",
	"xadd", "cmpxchg", "bt", "bts", "btr", "btc", "movnti", "movbe", "nop", "lea", "call", "jmp", NULL
};
static const char *const x86_string[] = { "movs", "stos", "lods", "scas", "cmps", "ins", "outs", NULL };
static const char *const x86_readonly[] = { "cmp", "test", "bt", "ucomis", "comis", "mul", "imul", "div", "idiv",
					    "cmov", "push", "jmp", "call", "movs", "movz", "cvt", NULL };
static const char *const x86_nomem[] = { "lea", "nop", "prefetch", "clflush", "clwb", "invlpg", "endbr", "ud",
					 NULL };
static const char *const x86_ignore[] = { "rip", "rsp", "esp", NULL };

/* _X86_STRING: ^(movs|stos|lods|scas|cmps|ins|outs)[bwlq]?$ (objdump: `rep stos %rax,%es:(%rdi)`) */
static int x86_is_string(struct sl mn)
{
	const char *const *stem;
	int suffix = mn.n >= 1 && mn.p[mn.n - 1] != '\0' && strchr("bwlq", mn.p[mn.n - 1]);

	for (stem = x86_string; *stem; stem++) {
		size_t len = strlen(*stem);

		if (((size_t)mn.n == len || (suffix && (size_t)mn.n == len + 1)) && sl_starts_z(mn, *stem))
			return 1;
	}
	return 0;
}

/* r\d+ followed by TAIL (a character, or 0 for nothing), the whole of S */
static int r_digits(struct sl s, char tail)
{
	Py_ssize_t i, end = tail ? s.n - 1 : s.n;

	if (end < 2 || s.p[0] != 'r' || (tail && s.p[s.n - 1] != tail))
		return 0;
	for (i = 1; i < end; i++)
		if (!is_digit(s.p[i]))
			return 0;
	return 1;
}

/* _x86_regwidth, of what follows an operand's '%' */
static int x86_regwidth(struct sl r)
{
	static const char *const w2[] = { "ax", "bx", "cx", "dx", "si", "di", "sp", "bp", NULL };
	static const char *const w1[] = { "al", "ah", "bl", "bh", "cl", "ch", "dl", "dh", "sil", "dil", "bpl", "spl",
					  NULL };

	if (sl_starts(r, "xmm"))
		return 16;
	if (sl_starts(r, "ymm"))
		return 32;
	if (sl_starts(r, "zmm"))
		return 64;
	if (sl_starts(r, "mm"))
		return 8;
	if (r_digits(r, 0) || (sl_starts(r, "r") && r.n == 3))
		return 8;
	if (r_digits(r, 'd') || (sl_starts(r, "e") && r.n == 3))
		return 4;
	if (r_digits(r, 'w') || in_list(r, w2))
		return 2;
	if (r_digits(r, 'b') || in_list(r, w1))
		return 1;
	return 0;
}

/* _x86_canon: rax/eax/ax/al -> ax, r8/r8d -> r8 */
static struct sl x86_canon(struct sl r)
{
	static const char *const from[] = { "al", "ah", "bl", "bh", "cl", "ch", "dl", "dh", "sil", "dil", NULL };
	static const char *const to[] = { "ax", "ax", "bx", "bx", "cx", "cx", "dx", "dx", "si", "di" };
	Py_ssize_t k;

	if (r_digits(r, 0))
		return r;
	if (r.n >= 3 && strchr("dwb", r.p[r.n - 1]) && r.p[r.n - 1] != '\0' && r_digits(r, r.p[r.n - 1]))
		return sl_at(r.p, r.n - 1);
	for (k = 0; from[k]; k++)
		if (sl_eq_z(r, from[k]))
			return sl_at(to[k], 2);
	return r.n == 3 ? sl_at(r.p + 1, 2) : r;
}

/*
 * The registers named in OP (_X86_REG.findall: %([a-z0-9]+)), canonical, onto X->regs at
 * *N; those in x86_ignore left out when IGNORE.
 */
static void x86_op_regs(struct sl op, int ignore, struct x86 *x, Py_ssize_t *n)
{
	Py_ssize_t i = 0, e;

	while (i < op.n) {
		if (op.p[i] != '%') {
			i++;
			continue;
		}
		for (e = i + 1; e < op.n && ((op.p[e] >= 'a' && op.p[e] <= 'z') || is_digit(op.p[e])); e++)
			;
		if (e == i + 1) {
			i++;
			continue;
		}
		if (!ignore || !in_list(sl_mid(op, i + 1, e), x86_ignore))
			x->regs[(*n)++] = x86_canon(sl_mid(op, i + 1, e));
		i = e;
	}
}

/* _x86_width */
static int x86_width(struct sl mn, struct sl *ops, Py_ssize_t nops, Py_ssize_t mem)
{
	static const char *const bwlq = "bwlq";
	static const int width[] = { 1, 2, 4, 8 };
	Py_ssize_t j;

	if (mn.n == 6 && sl_starts(mn, "mov") && (mn.p[3] == 's' || mn.p[3] == 'z') &&
	    (mn.p[4] == 'b' || mn.p[4] == 'w' || mn.p[4] == 'l') && strchr("wlq", mn.p[5]) && mn.p[5] != '\0')
		return width[strchr(bwlq, mn.p[4]) - bwlq];
	if (sl_ends(mn, "ss") && mn.n > 3)
		return 4;
	if (sl_ends(mn, "sd") && mn.n > 3)
		return 8;
	if (sl_eq(mn, "movd") || sl_eq(mn, "vmovd"))
		return 4;
	if (mn.n >= 1 && mn.p[mn.n - 1] != '\0' && strchr(bwlq, mn.p[mn.n - 1]) &&
	    (in_list(sl_at(mn.p, mn.n - 1), x86_suffixable) || sl_eq(mn, "movq") || sl_eq(mn, "vmovq")))
		return width[strchr(bwlq, mn.p[mn.n - 1]) - bwlq];
	for (j = 0; j < nops; j++) {
		if (j != mem && sl_starts(ops[j], "%")) {
			int w = x86_regwidth(sl_mid(ops[j], 1, ops[j].n));

			if (w)
				return w;
		}
	}
	return 8;
}

/* A memory operand: not an immediate, a register (unless segment:...), an indirect register
 * or a bare <symbol>. */
static int x86_is_mem(struct sl o)
{
	return !sl_starts(o, "$") && !sl_starts(o, "*%") && (!sl_starts(o, "%") || sl_has(o, ':')) &&
	       !(sl_starts(o, "<") && sl_ends(o, ">"));
}

/* isa.x86 on P (its operands may be rewritten: prefixes come off). X->regs has room for as
 * many as the line has bytes. */
static void x86_classify(struct parsed *p, struct x86 *x)
{
	static const char *const rets[] = { "ret", "retq", "leave", "leaveq", NULL };
	struct sl mn = p->mn, *ops = p->ops;
	Py_ssize_t nops = p->nops, i, mem = -1, n = 0;
	int last;

	x->rep = 0;
	while (nops && in_list(mn, x86_prefix)) {	/* "rep movsq ..." parsed as mn "rep" */
		struct sl rest;
		Py_ssize_t sp = sl_find(ops[0], " ");

		x->rep |= sl_starts(mn, "rep");
		mn = sp < 0 ? ops[0] : sl_mid(ops[0], 0, sp);
		rest = strip(sp < 0 ? sl_at(ops[0].p + ops[0].n, 0) : sl_mid(ops[0], sp + 1, ops[0].n));
		if (rest.n) {
			ops[0] = rest;
		} else {
			ops++;
			nops--;
		}
	}
	x->mn = mn;
	x->ops = ops;
	x->nops = nops;
	x->load = x->store = x->call = x->branch = x->symbolic = x->string_op = 0;
	x->ntarget = x->ndefs = x->nuses = 0;
	if (x86_is_string(mn)) {
		int seg = !nops || x->rep;

		for (i = 0; i < nops && !seg; i++)
			seg = sl_find(ops[i], "%es:(") >= 0 || sl_find(ops[i], "%ds:(") >= 0;
		if (seg) {
			x->string_op = 1;
			return;
		}
	}
	x->symbolic = p->note.n > 0;
	for (i = 0; i < nops; i++) {
		x->symbolic |= sl_has(ops[i], '<');
		if (mem < 0 && x86_is_mem(ops[i]))
			mem = i;
	}
	if (sl_starts(mn, "call")) {
		x->call = nops && sl_starts(ops[0], "*") ? 2 : 1;
		if (x->call == 2) {
			x86_op_regs(ops[0], 1, x, &n);
			x->ntarget = n;
			if (sl_has(ops[0], '(') || sl_has(ops[0], '<'))
				x->load = 8;
		}
		return;
	}
	if (sl_starts(mn, "j")) {
		x->branch = 1;
		if (nops && sl_starts(ops[0], "*") && (sl_has(ops[0], '(') || sl_has(ops[0], '<')))
			x->load = 8;
		return;
	}
	if (in_list(mn, rets))
		return;
	if (sl_starts(mn, "push")) {
		x->store = 8;
		x->load = mem >= 0 ? 8 : 0;
		return;
	}
	if (sl_starts(mn, "pop")) {
		x->load = 8;
		x->store = mem >= 0 ? 8 : 0;
		return;
	}
	/* defs/uses for call slices: AT&T writes the destination last */
	if (nops && sl_starts(ops[nops - 1], "%") && !sl_has(ops[nops - 1], ':'))
		x86_op_regs(ops[nops - 1], 0, x, &n);
	x->ndefs = n;
	for (i = 0; i + 1 < nops; i++)
		x86_op_regs(ops[i], 1, x, &n);
	x->nuses = n - x->ndefs;
	if (mem < 0 || starts_any(mn, x86_nomem))
		return;
	{
		int width = x86_width(mn, ops, nops, mem);
		static const char *const moves[] = { "mov", "vmov", "cvt", "vcvt", "stmxcsr", NULL };

		last = mem == nops - 1;
		if (sl_starts(mn, "set")) {
			x->store = 1;
		} else if ((starts_any(mn, moves) && !sl_starts(mn, "movs") && !sl_starts(mn, "movz")) ||
			   sl_eq(mn, "movss") || sl_eq(mn, "movsd")) {
			if (last)
				x->store = width;
			else
				x->load = width;
		} else if (mn.n == 6 && sl_starts(mn, "mov") && (mn.p[3] == 's' || mn.p[3] == 'z') &&
			   strchr("bwl", mn.p[4]) && mn.p[4] != '\0' && strchr("wlq", mn.p[5]) && mn.p[5] != '\0') {
			x->load = width;
		} else if (starts_any(mn, x86_readonly) && !sl_starts(mn, "btr") && !sl_starts(mn, "bts") &&
			   !sl_starts(mn, "btc")) {
			x->load = width;
		} else {
			x->load = width;
			if (last)
				x->store = width;
		}
	}
}

/* Room for parsing and classifying a shape of N bytes: operands and registers. */
struct room {
	struct sl *ops, *regs;
};

static int room_get(struct room *r, Py_ssize_t n)
{
	r->ops = PyMem_Malloc(sizeof(struct sl) * (size_t)(n + 2));
	r->regs = PyMem_Malloc(sizeof(struct sl) * (size_t)(n + 2));
	if (!r->ops || !r->regs) {
		PyMem_Free(r->ops);
		PyMem_Free(r->regs);
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

static void room_free(struct room *r)
{
	PyMem_Free(r->ops);
	PyMem_Free(r->regs);
}

/* ---------------------------------------------------------------- tables */

/*
 * An open-addressing hash table of byte strings to values (>= 0). The slots hold a hash and
 * where the entry is; an entry (its value, its length, its bytes) is in ENTRIES, so that a
 * lookup of a line (a vmlinux side looks up 700,000, in a table of 120,000) touches one slot
 * and one entry: most of its cost is those two reads from memory.
 */
struct slot {
	uint64_t hash;
	size_t at;		/* the entry's offset in ENTRIES, + 1; 0: an empty slot */
};

struct entry {
	int64_t value;
	Py_ssize_t len;
	char bytes[];		/* LEN of them, the next entry 8-byte aligned after them */
};

struct table {
	struct slot *slots;
	size_t cap, used;	/* CAP a power of 2, kept at least twice USED */
	char *entries;
	size_t entries_len, entries_cap;
};

static uint64_t hash_bytes(const char *p, Py_ssize_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n, w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	if (n > 0) {
		w = 0;
		memcpy(&w, p, (size_t)n);
		h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static struct slot *new_slots(size_t cap)
{
	if (cap > PY_SSIZE_T_MAX / sizeof(struct slot))
		return NULL;
	return PyMem_Calloc(cap, sizeof(struct slot));
}

static int table_init(struct table *t, size_t cap)
{
	memset(t, 0, sizeof(*t));
	t->slots = new_slots(cap);
	if (!t->slots) {
		PyErr_NoMemory();
		return -1;
	}
	t->cap = cap;
	return 0;
}

static void table_free(struct table *t)
{
	PyMem_Free(t->slots);
	PyMem_Free(t->entries);
	memset(t, 0, sizeof(*t));
}

static struct entry *entry_at(const struct table *t, const struct slot *s)
{
	return (struct entry *)(t->entries + s->at - 1);
}

/* The slot of K (N bytes, hash H): where it is, else the empty one where it would go. */
static struct slot *table_slot(const struct table *t, uint64_t h, const char *k, Py_ssize_t n)
{
	size_t i = (size_t)h & (t->cap - 1);

	for (;; i = (i + 1) & (t->cap - 1)) {
		struct slot *s = &t->slots[i];
		const struct entry *e;

		if (!s->at)
			return s;
		if (s->hash != h)
			continue;
		e = entry_at(t, s);
		if (e->len == n && (n == 0 || memcmp(e->bytes, k, (size_t)n) == 0))
			return s;
	}
}

static int64_t table_get(const struct table *t, uint64_t h, const char *k, Py_ssize_t n)
{
	const struct slot *s = table_slot(t, h, k, n);

	return s->at ? entry_at(t, s)->value : -1;
}

/* Twice the slots; 0, or -1 with MemoryError. */
static int table_grow(struct table *t)
{
	struct slot *slots = t->cap <= PY_SSIZE_T_MAX / 2 ? new_slots(t->cap * 2) : NULL;
	size_t i, j, mask = t->cap * 2 - 1;

	if (!slots) {
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].at)
			continue;
		for (j = (size_t)t->slots[i].hash & mask; slots[j].at; j = (j + 1) & mask)
			;
		slots[j] = t->slots[i];
	}
	PyMem_Free(t->slots);
	t->slots = slots;
	t->cap *= 2;
	return 0;
}

/* K (N bytes, hash H, not in T) -> VALUE (>= 0); 0, or -1 with MemoryError. */
static int table_add(struct table *t, uint64_t h, const char *k, Py_ssize_t n, int64_t value)
{
	size_t size, cap;
	struct slot *s;
	struct entry *e;

	if ((t->used + 1) * 2 > t->cap && table_grow(t) < 0)
		return -1;
	if ((size_t)n > PY_SSIZE_T_MAX / 2)
		goto nomem;
	size = (sizeof(struct entry) + (size_t)n + 7) & ~(size_t)7;
	if (size > t->entries_cap - t->entries_len) {
		char *entries;

		for (cap = t->entries_cap ? t->entries_cap : 1 << 16; size > cap - t->entries_len; cap *= 2)
			if (cap > PY_SSIZE_T_MAX / 2)
				goto nomem;
		entries = PyMem_Realloc(t->entries, cap);
		if (!entries)
			goto nomem;
		t->entries = entries;
		t->entries_cap = cap;
	}
	s = table_slot(t, h, k, n);
	e = (struct entry *)(t->entries + t->entries_len);
	e->value = value;
	e->len = n;
	if (n > 0)
		memcpy(e->bytes, k, (size_t)n);
	s->hash = h;
	s->at = t->entries_len + 1;
	t->entries_len += size;
	t->used++;
	return 0;
nomem:
	PyErr_NoMemory();
	return -1;
}

/* ---------------------------------------------------------------- the Mixer */

/* What a shape is, as far as a mix cares: mix._slim's Insn, its registers numbered. */
struct rec {
	uint8_t load, store;	/* widths, 0: none */
	uint8_t call, branch;	/* call: 0, 1 direct, 2 indirect */
	int32_t strop;		/* its string operation's number, -1: none */
	size_t regs;		/* target_regs, defs and uses (each without repeats) in the pool from here */
	uint32_t ntarget, ndefs, nuses;
};

struct counts {
	Py_ssize_t insns, padding, direct, indirect, stub, seq, branches;
	Py_ssize_t loads[MAX_WIDTH + 1], stores[MAX_WIDTH + 1];
};

typedef struct {
	PyObject_HEAD
	struct table lines;		/* a line -> its value (V_ above) */
	struct table shapes;		/* a shape -> its code */
	struct table regs;		/* a canonical register name -> its number */
	struct table strops;		/* a string operation ("rep movsq") -> its number */
	PyObject *strop_names;		/* list: number -> name */
	Py_ssize_t *strop_counts;	/* by number, in the call under way */
	size_t strop_cap;
	struct rec *recs;
	size_t nrecs, recs_cap;
	uint32_t *pool;			/* the records' registers */
	size_t npool, pool_cap;
	char *buf;			/* where shapes are made */
	size_t buf_cap;
	int64_t *seq;			/* the line values of the function under way, for call slices */
	size_t nseq, seq_cap;
	uint32_t *need;			/* a call slice's registers */
	size_t need_cap;
	int busy;
} Mixer;

/* *P, CAP items of SIZE bytes, grown to hold at least N; 0, or -1 with MemoryError. */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (n <= *cap)
		return 0;
	while (c < n) {
		if (c > PY_SSIZE_T_MAX / 2 / size)
			goto nomem;
		c *= 2;
	}
	q = PyMem_Realloc(*p, c * size);
	if (!q)
		goto nomem;
	*p = q;
	*cap = c;
	return 0;
nomem:
	PyErr_NoMemory();
	return -1;
}

/* The number of the name S (N bytes) in T, a new one the next; -1 with MemoryError. */
static int64_t number_of(struct table *t, const char *s, Py_ssize_t n)
{
	uint64_t h = hash_bytes(s, n);
	int64_t v = table_get(t, h, s, n);

	if (v >= 0)
		return v;
	v = (int64_t)t->used;
	return table_add(t, h, s, n, v) < 0 ? -1 : v;
}

/* The number of the string operation named S (N bytes, UTF-8); -1 with an exception. */
static int64_t strop_number(Mixer *m, const char *s, Py_ssize_t n)
{
	uint64_t h = hash_bytes(s, n);
	int64_t v = table_get(&m->strops, h, s, n);
	size_t old = m->strop_cap;
	PyObject *name;

	if (v >= 0)
		return v;
	v = (int64_t)PyList_GET_SIZE(m->strop_names);
	if (grow((void **)&m->strop_counts, &m->strop_cap, (size_t)v + 1, sizeof(*m->strop_counts)) < 0)
		return -1;
	memset(m->strop_counts + old, 0, (m->strop_cap - old) * sizeof(*m->strop_counts));
	name = PyUnicode_DecodeUTF8(s, n, NULL);
	if (!name || PyList_Append(m->strop_names, name) < 0) {
		Py_XDECREF(name);
		return -1;
	}
	Py_DECREF(name);
	if (table_add(&m->strops, h, s, n, v) < 0) {
		PyList_SetSlice(m->strop_names, v, v + 1, NULL);	/* names and numbers stay in step */
		return -1;
	}
	return v;
}

/* The register named S (N bytes) onto the pool, unless the set that starts at FROM has it. */
static int pool_add(Mixer *m, size_t from, const char *s, Py_ssize_t n)
{
	int64_t id = number_of(&m->regs, s, n);
	size_t i;

	if (id < 0)
		return -1;
	for (i = from; i < m->npool; i++)
		if (m->pool[i] == (uint32_t)id)
			return 0;
	if (grow((void **)&m->pool, &m->pool_cap, m->npool + 1, sizeof(*m->pool)) < 0)
		return -1;
	m->pool[m->npool++] = (uint32_t)id;
	return 0;
}

/* R as a new record: its code, or -1 with MemoryError. */
static int64_t add_rec(Mixer *m, const struct rec *r)
{
	if (m->nrecs >= MAX_RECS) {
		PyErr_NoMemory();
		return -1;
	}
	if (grow((void **)&m->recs, &m->recs_cap, m->nrecs + 1, sizeof(*m->recs)) < 0)
		return -1;
	m->recs[m->nrecs] = *r;
	return FIRST_REC + (int64_t)m->nrecs++;
}

static int64_t rec_of_x86(Mixer *m, const struct x86 *x)
{
	struct rec r = { (uint8_t)x->load, (uint8_t)x->store, (uint8_t)x->call, (uint8_t)x->branch, -1, 0, 0, 0, 0 };
	Py_ssize_t i, k = 0, n[3] = { x->ntarget, x->ndefs, x->nuses };
	uint32_t *count[3] = { &r.ntarget, &r.ndefs, &r.nuses };
	int set;

	if (x->string_op) {
		char *name = PyMem_Malloc((size_t)x->mn.n + 5);
		Py_ssize_t len = x->rep ? 4 : 0;
		int64_t v;

		if (!name) {
			PyErr_NoMemory();
			return -1;
		}
		memcpy(name, "rep ", 4);
		memcpy(name + len, x->mn.p, (size_t)x->mn.n);
		v = strop_number(m, name, len + x->mn.n);
		PyMem_Free(name);
		if (v < 0)
			return -1;
		r.strop = (int32_t)v;
	}
	r.regs = m->npool;
	for (set = 0; set < 3; set++) {
		size_t from = m->npool;

		for (i = 0; i < n[set]; i++, k++)
			if (pool_add(m, from, x->regs[k].p, x->regs[k].n) < 0)
				return -1;
		*count[set] = (uint32_t)(m->npool - from);
	}
	return add_rec(m, &r);
}

/* ---------------------------------------------------------------- lines not ASCII: Python's answer */

/* A load or store list from Python: no more than one width, 1 to MAX_WIDTH. */
static int width_from(PyObject *list, uint8_t *w)
{
	PyObject *t = PySequence_Tuple(list);
	long v = 0;

	if (!t)
		return -1;
	if (PyTuple_GET_SIZE(t) > 1) {
		PyErr_SetString(PyExc_ValueError, "x86 makes one load and one store at most");
		goto fail;
	}
	if (PyTuple_GET_SIZE(t) == 1) {
		v = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
		if (v == -1 && PyErr_Occurred())
			goto fail;
		if (v < 1 || v > MAX_WIDTH) {
			PyErr_SetString(PyExc_ValueError, "a width out of range");
			goto fail;
		}
	}
	Py_DECREF(t);
	*w = (uint8_t)v;
	return 0;
fail:
	Py_DECREF(t);
	return -1;
}

static int regs_from(Mixer *m, PyObject *names, uint32_t *count)
{
	PyObject *t = PySequence_Tuple(names);
	size_t from = m->npool;
	Py_ssize_t i;

	if (!t)
		return -1;
	for (i = 0; i < PyTuple_GET_SIZE(t); i++) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(t, i), &n);

		if (!s || pool_add(m, from, s, n) < 0) {
			Py_DECREF(t);
			return -1;
		}
	}
	Py_DECREF(t);
	*count = (uint32_t)(m->npool - from);
	return 0;
}

/* The record of (loads, stores, call, branch, string_op, target_regs, defs, uses), what
 * asm.mix says of a line that is not ASCII. */
static int64_t rec_of_tuple(Mixer *m, PyObject *t)
{
	struct rec r = { 0, 0, 0, 0, -1, 0, 0, 0, 0 };
	PyObject *call, *strop;
	int branch;

	if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8) {
		PyErr_SetString(PyExc_TypeError, "a line's record is a tuple of 8");
		return -1;
	}
	if (width_from(PyTuple_GET_ITEM(t, 0), &r.load) < 0 || width_from(PyTuple_GET_ITEM(t, 1), &r.store) < 0)
		return -1;
	call = PyTuple_GET_ITEM(t, 2);
	if (call != Py_None) {
		if (PyUnicode_Check(call) && PyUnicode_CompareWithASCIIString(call, "direct") == 0) {
			r.call = 1;
		} else if (PyUnicode_Check(call) && PyUnicode_CompareWithASCIIString(call, "indirect") == 0) {
			r.call = 2;
		} else {
			PyErr_SetString(PyExc_ValueError, "a call is direct or indirect");
			return -1;
		}
	}
	branch = PyObject_IsTrue(PyTuple_GET_ITEM(t, 3));
	if (branch < 0)
		return -1;
	r.branch = (uint8_t)branch;
	strop = PyTuple_GET_ITEM(t, 4);
	if (strop != Py_None) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(strop, &n);
		int64_t v = s ? strop_number(m, s, n) : -1;

		if (v < 0)
			return -1;
		r.strop = (int32_t)v;
	}
	r.regs = m->npool;
	if (regs_from(m, PyTuple_GET_ITEM(t, 5), &r.ntarget) < 0 || regs_from(m, PyTuple_GET_ITEM(t, 6), &r.ndefs) < 0 ||
	    regs_from(m, PyTuple_GET_ITEM(t, 7), &r.nuses) < 0)
		return -1;
	return add_rec(m, &r);
}

static int64_t code_from_python(const char *s, Py_ssize_t n, PyObject *obj, PyObject *classify, Mixer *m)
{
	PyObject *line = obj ? Py_NewRef(obj) : PyUnicode_DecodeUTF8(s, n, NULL), *res;
	int64_t code;

	if (!line)
		return -1;
	res = PyObject_CallOneArg(classify, line);
	Py_DECREF(line);
	if (!res)
		return -1;
	if (res == Py_None)
		code = NOT_CODE;
	else if (PyUnicode_Check(res))
		code = PAD;
	else
		code = rec_of_tuple(m, res);
	Py_DECREF(res);
	return code;
}

/* ---------------------------------------------------------------- counting */

static int64_t code_of_ascii(Mixer *m, const char *s, Py_ssize_t n)
{
	const char *shape;
	Py_ssize_t k;
	uint64_t h;
	int64_t code;
	struct parsed p;
	struct x86 x;
	struct room r;

	if (is_padding(sl_at(s, n)))
		return PAD;
	if ((size_t)n > PY_SSIZE_T_MAX / 2 - 1 || grow((void **)&m->buf, &m->buf_cap, 2 * (size_t)n + 1, 1) < 0)
		return -1;
	k = make_shape(s, n, m->buf, &shape);
	h = hash_bytes(shape, k);
	code = table_get(&m->shapes, h, shape, k);
	if (code >= 0)
		return code;
	if (room_get(&r, k) < 0)
		return -1;
	p.ops = r.ops;
	x.regs = r.regs;
	if (!parse(sl_at(shape, k), &p)) {
		code = NOT_CODE;
	} else {
		x86_classify(&p, &x);
		code = rec_of_x86(m, &x);
	}
	room_free(&r);
	if (code < 0 || table_add(&m->shapes, h, shape, k, code) < 0)
		return -1;
	return code;
}

/* The value of the line S (N bytes of UTF-8, hash H; ASCII: known all ASCII; OBJ: it as a str,
 * or NULL) in the lines table, classified when new; -1 with an exception. */
static int64_t line_value(Mixer *m, const char *s, Py_ssize_t n, uint64_t h, int ascii, PyObject *obj,
			  PyObject *classify)
{
	int64_t v = table_get(&m->lines, h, s, n), code;

	if (v >= 0)
		return v;
	if (ascii || all_ascii(s, n))
		code = code_of_ascii(m, s, n);
	else
		code = code_from_python(s, n, obj, classify, m);
	if (code < 0)
		return -1;
	v = code << 32 | (sl_find(sl_at(s, n), "<stub:") >= 0 ? V_STUB : 0);
	if (code >= FIRST_REC) {
		const struct rec *r = &m->recs[code - FIRST_REC];

		v |= (int64_t)r->load << 1 | (int64_t)r->store << 9 | (r->branch ? V_BRANCH : 0) |
		     (int64_t)r->call << 18 | (r->call && r->ntarget ? V_SLICED : 0);
		if (r->strop >= 0)
			v |= (int64_t)(r->strop + 1 < STROP_MANY ? r->strop + 1 : STROP_MANY) << 21;
	}
	return table_add(&m->lines, h, s, n, v) < 0 ? -1 : v;
}

static int meets(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	size_t i, j;

	for (i = 0; i < na; i++)
		for (j = 0; j < nb; j++)
			if (a[i] == b[j])
				return 1;
	return 0;
}

/*
 * mix.call_sequence's length for the call at AT of the function under way: the instructions
 * before it that compute its target (a backward register slice); -1 with MemoryError.
 */
static Py_ssize_t call_slice(Mixer *m, size_t at)
{
	const struct rec *call = &m->recs[V_CODE(m->seq[at]) - FIRST_REC];
	size_t nneed = call->ntarget, i, j;
	Py_ssize_t found = 0, steps = 1, back = (Py_ssize_t)at - 1;

	if (grow((void **)&m->need, &m->need_cap, nneed, sizeof(*m->need)) < 0)
		return -1;
	memcpy(m->need, m->pool + call->regs, nneed * sizeof(*m->need));
	while (nneed && back >= 0 && steps <= SLICE_WINDOW) {
		int64_t v = m->seq[back--], code = V_CODE(v);
		const struct rec *r;
		const uint32_t *defs, *uses;

		if (code == PAD)
			continue;
		if (code == NOT_CODE || V_CALL(v) || (v & V_BRANCH))
			break;
		r = &m->recs[code - FIRST_REC];
		defs = m->pool + r->regs + r->ntarget;
		uses = defs + r->ndefs;
		if (meets(defs, r->ndefs, m->need, nneed)) {
			found++;
			for (i = j = 0; i < nneed; i++)		/* need = (need - defs) | uses */
				if (!meets(&m->need[i], 1, defs, r->ndefs))
					m->need[j++] = m->need[i];
			nneed = j;
			if (grow((void **)&m->need, &m->need_cap, nneed + r->nuses, sizeof(*m->need)) < 0)
				return -1;
			for (i = 0; i < r->nuses; i++)
				if (!meets(&uses[i], 1, m->need, nneed))
					m->need[nneed++] = uses[i];
		}
		steps++;
	}
	return found;
}

/* The line of value V, next in the function under way, into C. */
static int count_line(Mixer *m, struct counts *c, int64_t v)
{
	int64_t code = V_CODE(v), strop;

	if (grow((void **)&m->seq, &m->seq_cap, m->nseq + 1, sizeof(*m->seq)) < 0)
		return -1;
	m->seq[m->nseq++] = v;
	if (code == PAD)
		c->padding++;
	if (code < FIRST_REC)
		return 0;
	c->insns++;
	c->loads[V_LOAD(v)]++;		/* [0] counts those with none, unread */
	c->stores[V_STORE(v)]++;
	c->branches += (v & V_BRANCH) != 0;
	strop = V_STROP(v);
	if (strop)
		m->strop_counts[strop == STROP_MANY ? m->recs[code - FIRST_REC].strop : strop - 1]++;
	if (V_CALL(v)) {
		Py_ssize_t k = v & V_SLICED ? call_slice(m, m->nseq - 1) : 0;

		if (k < 0)
			return -1;
		c->seq += k + 1;
		if (V_CALL(v) == 1) {
			c->direct++;
			c->stub += v & V_STUB;
		} else {
			c->indirect++;
		}
	}
	return 0;
}

/* The UTF-8 of the str O (for ASCII, its own bytes): NULL with an exception. */
static const char *utf8_of(PyObject *o, Py_ssize_t *n)
{
	if (!PyUnicode_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "a line is a str");
		return NULL;
	}
	return PyUnicode_AsUTF8AndSize(o, n);
}

/* 0 for a str with no UTF-8 form (lone surrogates: Python mixes it), else -1. */
static int no_utf8(void)
{
	if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
		return -1;
	PyErr_Clear();
	return 0;
}

/*
 * A function's TEXT, its lines split on newlines (Function.lines), into C: 1, or 0 when
 * Python has to mix it, or -1 with an exception.
 *
 * Nearly every line has been seen, and looking it up is mostly waiting for memory: its slot,
 * then its entry. So the lines are hashed AHEAD before they are looked up, their slots
 * fetched then, and their entries halfway (from the slot, which has come by then).
 */
#define AHEAD 8
static int mix_text(Mixer *m, struct counts *c, PyObject *text, PyObject *classify)
{
	struct {
		const char *s;
		Py_ssize_t n;
		uint64_t h;
	} ring[AHEAD];
	Py_ssize_t n, start = 0, pushed = 0, done = 0;
	const char *s = utf8_of(text, &n);
	int ascii, more;

	if (!s)
		return no_utf8();
	ascii = PyUnicode_IS_ASCII(text);
	m->nseq = 0;
	if (n == 0)
		return 1;
	for (more = 1; more || done < pushed;) {
		if (more && pushed - done < AHEAD) {	/* the next line into the ring */
			const char *nl = memchr(s + start, '\n', (size_t)(n - start));
			Py_ssize_t end = nl ? nl - s : n, k = pushed++ % AHEAD;

			ring[k].s = s + start;
			ring[k].n = end - start;
			ring[k].h = hash_bytes(ring[k].s, ring[k].n);
			__builtin_prefetch(&m->lines.slots[ring[k].h & (m->lines.cap - 1)]);
			more = nl != NULL;
			start = end + 1;
			if (pushed - done >= AHEAD / 2) {
				const struct slot *slot;

				k = (pushed - AHEAD / 2) % AHEAD;
				slot = &m->lines.slots[ring[k].h & (m->lines.cap - 1)];
				if (slot->at)
					__builtin_prefetch(entry_at(&m->lines, slot));
			}
			if (more && pushed - done < AHEAD)
				continue;
		}
		{
			Py_ssize_t k = done++ % AHEAD;
			int64_t v = line_value(m, ring[k].s, ring[k].n, ring[k].h, ascii, NULL, classify);

			if (v < 0 || count_line(m, c, v) < 0)
				return -1;
		}
	}
	return 1;
}

/* A function's LINES (a list of str) into C: as mix_text. */
static int mix_lines(Mixer *m, struct counts *c, PyObject *lines, PyObject *classify)
{
	PyObject *t = PySequence_Tuple(lines);	/* a classify callback cannot change it under us */
	Py_ssize_t i, n;
	int rc = 1;

	if (!t)
		return -1;
	m->nseq = 0;
	for (i = 0; i < PyTuple_GET_SIZE(t) && rc == 1; i++) {
		PyObject *line = PyTuple_GET_ITEM(t, i);
		const char *s = utf8_of(line, &n);
		int64_t v;

		if (!s) {
			rc = no_utf8();
		} else if (n > 0 && memchr(s, '\n', (size_t)n)) {
			rc = 0;		/* no line of Function.lines holds one; Python says what it makes of it */
		} else {
			v = line_value(m, s, n, hash_bytes(s, n), PyUnicode_IS_ASCII(line), line, classify);
			if (v < 0 || count_line(m, c, v) < 0)
				rc = -1;
		}
	}
	Py_DECREF(t);
	return rc;
}

static PyObject *width_dict(const Py_ssize_t *count)
{
	PyObject *d = PyDict_New();
	int w;

	for (w = 1; d && w <= MAX_WIDTH; w++) {
		PyObject *k, *v;
		int rc;

		if (!count[w])
			continue;
		k = PyLong_FromLong(w);
		v = PyLong_FromSsize_t(count[w]);
		rc = k && v ? PyDict_SetItem(d, k, v) : -1;
		Py_XDECREF(k);
		Py_XDECREF(v);
		if (rc < 0)
			Py_CLEAR(d);
	}
	return d;
}

/* The values of a mix.Mix, in the order of its fields. */
static PyObject *counts_tuple(Mixer *m, const struct counts *c)
{
	PyObject *loads = width_dict(c->loads), *stores = width_dict(c->stores), *strops = PyDict_New();
	Py_ssize_t i;

	if (!loads || !stores || !strops)
		goto fail;
	for (i = 0; i < PyList_GET_SIZE(m->strop_names); i++) {
		PyObject *v;
		int rc;

		if (!m->strop_counts[i])
			continue;
		v = PyLong_FromSsize_t(m->strop_counts[i]);
		rc = v ? PyDict_SetItem(strops, PyList_GET_ITEM(m->strop_names, i), v) : -1;
		Py_XDECREF(v);
		if (rc < 0)
			goto fail;
	}
	return Py_BuildValue("(nnNNnnnnnN)", c->insns, c->padding, loads, stores, c->direct, c->indirect, c->stub,
			     c->seq, c->branches, strops);
fail:
	Py_XDECREF(loads);
	Py_XDECREF(stores);
	Py_XDECREF(strops);
	return NULL;
}

static PyObject *mixer_run(Mixer *m, PyObject *args, int sum)
{
	PyObject *items, *classify, *t = NULL, *out = NULL;
	struct counts *c;
	Py_ssize_t i;
	int rc = 1;

	if (!PyArg_ParseTuple(args, "OO", &items, &classify))
		return NULL;
	if (m->busy)		/* asked again from the callback, or another thread */
		Py_RETURN_NONE;
	c = PyMem_Calloc(1, sizeof(*c));
	if (!c)
		return PyErr_NoMemory();
	m->busy = 1;
	if (m->strop_cap)
		memset(m->strop_counts, 0, m->strop_cap * sizeof(*m->strop_counts));
	if (!sum) {
		rc = PyUnicode_Check(items) ? mix_text(m, c, items, classify) : mix_lines(m, c, items, classify);
	} else if ((t = PySequence_Tuple(items)) == NULL) {
		rc = -1;
	} else {
		for (i = 0; i < PyTuple_GET_SIZE(t) && rc == 1; i++) {
			PyObject *f = PyTuple_GET_ITEM(t, i);

			rc = PyUnicode_Check(f) ? mix_text(m, c, f, classify) : mix_lines(m, c, f, classify);
		}
	}
	if (rc == 1)
		out = counts_tuple(m, c);
	else if (rc == 0)
		out = Py_NewRef(Py_None);
	Py_XDECREF(t);
	PyMem_Free(c);
	m->busy = 0;
	return out;
}

PyDoc_STRVAR(mixer_mix_doc,
"mix(lines, classify) -> the values of mix.mix(target, LINES) (a list of str, or a function's\n"
"text), a Mix's fields in order; None when Python has to make it. CLASSIFY(line) says what a\n"
"line that is not ASCII is: None (not code), a str (padding) or (loads, stores, call, branch,\n"
"string_op, target_regs, defs, uses).");

static PyObject *mixer_mix(PyObject *self, PyObject *args)
{
	return mixer_run((Mixer *)self, args, 0);
}

PyDoc_STRVAR(mixer_sum_doc,
"sum(functions, classify) -> the values of mix.mix_sum(target, FUNCTIONS), each function its text\n"
"(split on newlines) or its lines; None when Python has to make it. CLASSIFY: as for mix.");

static PyObject *mixer_sum(PyObject *self, PyObject *args)
{
	return mixer_run((Mixer *)self, args, 1);
}

static PyObject *mixer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	Mixer *m;

	if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
		PyErr_SetString(PyExc_TypeError, "Mixer() takes no arguments");
		return NULL;
	}
	m = (Mixer *)type->tp_alloc(type, 0);
	if (!m)
		return NULL;
	m->strop_names = PyList_New(0);
	if (!m->strop_names || table_init(&m->lines, 1 << 12) < 0 || table_init(&m->shapes, 1 << 10) < 0 ||
	    table_init(&m->regs, 1 << 6) < 0 || table_init(&m->strops, 1 << 4) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return (PyObject *)m;
}

static void mixer_dealloc(PyObject *self)
{
	Mixer *m = (Mixer *)self;

	table_free(&m->lines);
	table_free(&m->shapes);
	table_free(&m->regs);
	table_free(&m->strops);
	Py_XDECREF(m->strop_names);
	PyMem_Free(m->strop_counts);
	PyMem_Free(m->recs);
	PyMem_Free(m->pool);
	PyMem_Free(m->buf);
	PyMem_Free(m->seq);
	PyMem_Free(m->need);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *mixer_sizes(PyObject *self, void *closure)
{
	Mixer *m = (Mixer *)self;

	return Py_BuildValue("(nnn)", (Py_ssize_t)m->lines.used, (Py_ssize_t)m->shapes.used, (Py_ssize_t)m->nrecs);
}

static PyMethodDef mixer_methods[] = {
	{ "mix", mixer_mix, METH_VARARGS, mixer_mix_doc },
	{ "sum", mixer_sum, METH_VARARGS, mixer_sum_doc },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef mixer_getset[] = {
	{ "sizes", mixer_sizes, NULL, "(lines, shapes, records) kept", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject MixerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "flagbench.asm._mix.Mixer",
	.tp_doc = "The x86-64 lines, shapes and records seen so far, and mixes made with them.",
	.tp_basicsize = sizeof(Mixer),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = mixer_new,
	.tp_dealloc = mixer_dealloc,
	.tp_methods = mixer_methods,
	.tp_getset = mixer_getset,
};

/* ---------------------------------------------------------------- the rules one by one, for tests */

/* The str O, ASCII, as a piece; 0, or -1 with ValueError (not ASCII) or TypeError. */
static int ascii_arg(PyObject *o, struct sl *s)
{
	if (!PyUnicode_Check(o) || !PyUnicode_IS_ASCII(o)) {
		PyErr_SetString(PyUnicode_Check(o) ? PyExc_ValueError : PyExc_TypeError, "an ASCII str");
		return -1;
	}
	s->p = PyUnicode_AsUTF8AndSize(o, &s->n);
	return s->p ? 0 : -1;
}

static PyObject *str_of(struct sl s)
{
	return PyUnicode_FromStringAndSize(s.p, s.n);
}

static PyObject *ops_list(const struct sl *ops, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; l && i < n; i++) {
		PyObject *o = str_of(ops[i]);

		if (!o)
			Py_CLEAR(l);
		else
			PyList_SET_ITEM(l, i, o);
	}
	return l;
}

static PyObject *reg_set(const struct sl *regs, Py_ssize_t n)
{
	PyObject *l = ops_list(regs, n), *set;

	if (!l)
		return NULL;
	set = PyFrozenSet_New(l);
	Py_DECREF(l);
	return set;
}

static PyObject *width_list(int w)
{
	return w ? Py_BuildValue("[i]", w) : PyList_New(0);
}

PyDoc_STRVAR(x86_shape_doc, "x86_shape(line) -> mix._NUMBER.sub(\"0\", mix._SYMBOL.sub(\"<>\", LINE)), LINE ASCII.");

static PyObject *x86_shape(PyObject *self, PyObject *arg)
{
	struct sl s;
	const char *shape;
	char *buf;
	Py_ssize_t k;
	PyObject *out;

	if (ascii_arg(arg, &s) < 0)
		return NULL;
	buf = PyMem_Malloc(2 * (size_t)s.n + 1);
	if (!buf)
		return PyErr_NoMemory();
	k = make_shape(s.p, s.n, buf, &shape);
	out = PyUnicode_FromStringAndSize(shape, k);
	PyMem_Free(buf);
	return out;
}

PyDoc_STRVAR(is_padding_doc, "is_padding(line) -> bool(model.PADDING.match(LINE)), LINE ASCII.");

static PyObject *is_padding_py(PyObject *self, PyObject *arg)
{
	struct sl s;

	if (ascii_arg(arg, &s) < 0)
		return NULL;
	return PyBool_FromLong(is_padding(s));
}

PyDoc_STRVAR(x86_parse_doc, "x86_parse(line) -> mix.parse(LINE, \"#\"), LINE ASCII.");

static PyObject *x86_parse(PyObject *self, PyObject *arg)
{
	struct sl s;
	struct parsed p;
	struct room r;
	PyObject *out;

	if (ascii_arg(arg, &s) < 0 || room_get(&r, s.n) < 0)
		return NULL;
	p.ops = r.ops;
	if (!parse(s, &p))
		out = Py_NewRef(Py_None);
	else
		out = Py_BuildValue("(NNN)", str_of(p.mn), ops_list(p.ops, p.nops), str_of(p.note));
	room_free(&r);
	return out;
}

PyDoc_STRVAR(x86_insn_doc,
"x86_insn(shape) -> None for what mix.parse(SHAPE, \"#\") says is no instruction, else the fields of\n"
"isa.x86(*that): (mn, ops, loads, stores, call, branch, string_op, target_regs, defs, uses,\n"
"symbolic), SHAPE ASCII.");

static PyObject *x86_insn(PyObject *self, PyObject *arg)
{
	static const char *const calls[] = { NULL, "direct", "indirect" };
	struct sl s;
	struct parsed p;
	struct x86 x;
	struct room r;
	PyObject *out, *strop = NULL;

	if (ascii_arg(arg, &s) < 0 || room_get(&r, s.n) < 0)
		return NULL;
	p.ops = r.ops;
	x.regs = r.regs;
	if (!parse(s, &p)) {
		room_free(&r);
		Py_RETURN_NONE;
	}
	x86_classify(&p, &x);
	if (x.string_op) {
		PyObject *mn = str_of(x.mn);

		strop = mn ? PyUnicode_FromFormat("%s%U", x.rep ? "rep " : "", mn) : NULL;
		Py_XDECREF(mn);
		if (!strop) {
			room_free(&r);
			return NULL;
		}
	} else {
		strop = Py_NewRef(Py_None);
	}
	out = Py_BuildValue("(NNNNzOONNNO)", str_of(x.mn), ops_list(x.ops, x.nops), width_list(x.load),
			    width_list(x.store), calls[x.call], x.branch ? Py_True : Py_False, strop,
			    reg_set(x.regs, x.ntarget), reg_set(x.regs + x.ntarget, x.ndefs),
			    reg_set(x.regs + x.ntarget + x.ndefs, x.nuses), x.symbolic ? Py_True : Py_False);
	Py_DECREF(strop);
	room_free(&r);
	return out;
}

static PyMethodDef methods[] = {
	{ "x86_shape", x86_shape, METH_O, x86_shape_doc },
	{ "is_padding", is_padding_py, METH_O, is_padding_doc },
	{ "x86_parse", x86_parse, METH_O, x86_parse_doc },
	{ "x86_insn", x86_insn, METH_O, x86_insn_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "flagbench.asm._mix",
	.m_doc = "asm.mix's instruction mix of x86-64 lines, in C (see _mix.c's header comment).",
	.m_size = -1,
	.m_methods = methods,
};

PyMODINIT_FUNC PyInit__mix(void)
{
	PyObject *m;

	if (PyType_Ready(&MixerType) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (m && PyModule_AddObjectRef(m, "Mixer", (PyObject *)&MixerType) < 0)
		Py_CLEAR(m);
	return m;
}
