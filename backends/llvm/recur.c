/*
 * recur.c — RECUR kernels with a program (ABI 1.10): the fused scan loop
 * as one LLVM function `kiln_rr` (included by llvm.c).  Stub at step 0.
 */
