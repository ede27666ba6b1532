/* Shaped like a kernel module: .modinfo strings, __mod_ and __addressable_ symbols (which
   bloat-o-meter skips), numbered statics (name.N) it folds, and init/exit functions. */
static const char __UNIQUE_ID_license12[] __attribute__((section(".modinfo"), used, aligned(1))) = "license=GPL";
static const char __UNIQUE_ID_author13[] __attribute__((section(".modinfo"), used, aligned(1))) = "author=Test";
const char __mod_device_table_pci[32] __attribute__((used)) = "pci table";
const char vermagic[16] __attribute__((used)) = "6.1.0 SMP";
static void *__addressable_init_mod __attribute__((used)) = 0;
struct counter { int a, b; };
int demo_state[8];
static int count(int x) { static int calls; calls += x; return calls; }
int init_module(void) { static int once = 1; demo_state[0] = count(once); return 0; }
void cleanup_module(void) { static int twice = 2; demo_state[1] = count(twice); }
