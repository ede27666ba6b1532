/* The callees, built with the same flags as the callers. */
static volatile unsigned long sink;

unsigned long ext_add(unsigned long a, unsigned long b) { return a + b; }
unsigned long ext_mix(unsigned long a) { return (a ^ (a >> 7)) * 0x9e3779b1UL; }
void ext_note(unsigned long v) { sink = v; }
