/*
 * _padding.h: model.PADDING, whether a normalised line is alignment padding, in C for the two
 * asm extensions that ask (_normalise.c cutting a function's trailing padding, _mix.c counting
 * padding apart): one spelling of the rule, each module's tests holding it to the regex.
 */
#ifndef FLAGBENCH_PADDING_H
#define FLAGBENCH_PADDING_H

#include <Python.h>
#include <string.h>

/* re's \w on ASCII. */
static inline int pad_word(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* S (N bytes) starts with the LEN bytes of P at K: K + LEN, else -1. */
static inline Py_ssize_t pad_lit(const char *s, Py_ssize_t n, Py_ssize_t k, const char *p, Py_ssize_t len)
{
	return k >= 0 && n - k >= len && memcmp(s + k, p, len) == 0 ? k + len : -1;
}

/* At K, a space and anything after it, or nothing: the (?: .*)?$ that ends model.PADDING. */
static inline int pad_tail(const char *s, Py_ssize_t n, Py_ssize_t k)
{
	return k >= 0 && (k == n || s[k] == ' ');
}

static inline Py_ssize_t pad_spaces(const char *s, Py_ssize_t n, Py_ssize_t k)
{
	Py_ssize_t j = k;

	if (k < 0)
		return -1;
	while (j < n && s[j] == ' ')
		j++;
	return j > k ? j : -1;
}

/* [er]si, [er]iz: "e" or "r", then the two letters. */
static inline Py_ssize_t pad_reg(const char *s, Py_ssize_t n, Py_ssize_t k, const char *two)
{
	return k >= 0 && k < n && (s[k] == 'e' || s[k] == 'r') ? pad_lit(s, n, k + 1, two, 2) : -1;
}

/* The model.PADDING this implements: tests/test_normalise.py fails when it changes. */
#define PADDING_PATTERN "(?:(?:data16|cs|ds|rex\\.?\\w*) )*(?:nop\\w*|xchg +%ax,%ax|int3|\\.\\.\\.|c\\.nop" \
	"|break 0,0|mov r8, r8|lea +0x0\\(%[er]si,%[er]iz,1\\),%[er]si" \
	"|\\.inst 0x00000000.*|udf #0|\\.short 0x0000|\\.word 0x00000000|\\(bad\\))(?: .*)?$"

/*
 * Whether model.PADDING matches the line S (N bytes, no newline). Its prefixes are taken
 * greedily: no alternative after them starts like one, so giving one back never helps; each
 * alternative's own repeat (nop\w*, spaces) ends where the next character could not follow.
 */
static inline int padding_line(const char *s, Py_ssize_t n)
{
	static const char *const fixed[] = { "int3", "...", "c.nop", "break 0,0", "mov r8, r8", "udf #0",
					     ".short 0x0000", ".word 0x00000000", "(bad)" };
	Py_ssize_t k = 0, j;
	size_t i;

	for (;;) {
		if ((j = pad_lit(s, n, k, "data16 ", 7)) < 0 && (j = pad_lit(s, n, k, "cs ", 3)) < 0 &&
		    (j = pad_lit(s, n, k, "ds ", 3)) < 0 && (j = pad_lit(s, n, k, "rex", 3)) >= 0) {
			j += j < n && s[j] == '.';
			while (j < n && pad_word(s[j]))
				j++;
			j = pad_lit(s, n, j, " ", 1);
		}
		if (j < 0)
			break;
		k = j;
	}
	if ((j = pad_lit(s, n, k, "nop", 3)) >= 0) {
		while (j < n && pad_word(s[j]))
			j++;
		return pad_tail(s, n, j);
	}
	if (pad_tail(s, n, pad_lit(s, n, pad_spaces(s, n, pad_lit(s, n, k, "xchg", 4)), "%ax,%ax", 7)))
		return 1;
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (pad_tail(s, n, pad_lit(s, n, k, fixed[i], strlen(fixed[i]))))
			return 1;
	if (pad_lit(s, n, k, ".inst 0x00000000", 16) >= 0)
		return 1;
	j = pad_lit(s, n, pad_spaces(s, n, pad_lit(s, n, k, "lea", 3)), "0x0(%", 5);
	j = pad_lit(s, n, pad_reg(s, n, j, "si"), ",%", 2);
	j = pad_lit(s, n, pad_reg(s, n, j, "iz"), ",1),%", 5);
	return pad_tail(s, n, pad_reg(s, n, j, "si"));
}

#endif
