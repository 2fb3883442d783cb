/* The interpreter plugin's source, compiled into test_interp so that the
 * test calls its entry point directly (no dlopen). */
#include "../backends/interp/interp.c"
