/* Call-heavy code: every call goes to a function in another translation unit,
 * so the compiler must emit its full call sequence (-mlong-calls or not). */
extern unsigned long ext_add(unsigned long a, unsigned long b);
extern unsigned long ext_mix(unsigned long a);
extern void ext_note(unsigned long v);

unsigned long call_once(unsigned long x)
{
	return ext_add(x, 1);
}

unsigned long call_chain(unsigned long x)
{
	x = ext_add(x, 3);
	x = ext_mix(x);
	x = ext_add(x, ext_mix(x));
	ext_note(x);
	return x;
}

unsigned long call_loop(unsigned long n)
{
	unsigned long acc = 0;
	for (unsigned long i = 0; i < n; i++)
		acc = ext_add(acc, ext_mix(i));
	return acc;
}
