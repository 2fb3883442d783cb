/*
 * recur.c — RECUR kernels with a program (ABI 1.10): the fused scan loop
 * on the interpreter (included by interp.c).  Stub at step 0.
 */
