/* Many small functions of varied length: alignment padding between them is what bloat-o-meter
   cannot see. GROW adds work to some of them (a "new" build). */
#ifndef GROW
#define GROW 0
#endif
#define F(n) int f##n(int x) { int s = x; for (int i = 0; i < (n % 5) + GROW; i++) s = s * 3 + i; return s ^ n; }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9)
F(10) F(11) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19)
static int table_data[64] = {1, 2, 3};
int sum(int n) { int s = 0; for (int i = 0; i < n; i++) s += f1(i) + f7(i) + table_data[i & 63]; return s; }
