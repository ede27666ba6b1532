/* Every nm letter bloat-o-meter cares about, and some it skips: globals and statics in
   text, data, rodata and bss, weak code and data, a common, TLS, a .cold split (gcc -O2). */
int small_g = 3;
static int small_l = 4;
int small_b;
static int small_lb;
const int ro_g[4] = {1, 2, 3, 4};
static const char ro_l[16] = "static rodata";
int big[100] = {1};
int common_x __attribute__((common));
__attribute__((weak)) int weak_data = 5;
__attribute__((weak)) int weak_fn(int x) { small_l ^= x; return x + small_l + small_lb++; }
__thread int tls_d = 1;
__thread int tls_b;
static int helper(int i) { return big[i & 63] * 7 + ro_l[i & 15]; }
int (*keep)(int) = helper;
extern void report(const char *, int) __attribute__((cold));
int get(int i)
{
	if (i < 0) {                       /* calls a cold function: gcc splits get.cold off */
		for (int k = 0; k < 10; k++)
			report("negative index", k * i);
		return -1;
	}
	return big[i] + ro_g[i & 3] + small_g + small_b + helper(i);
}
