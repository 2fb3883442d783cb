/*
 * test_recur_kernel.c — hand-built RECUR kernels with a program (ABI
 * 1.10) on every backend through the loader.  Stub at step 0.
 */
#include "tap.h"
#include <kiln/backend.h>

int main(void)
{
    ok(KILN_ABI_MINOR >= 10, "ABI 1.10 has RECUR kernels with programs");
    return done_testing();
}
