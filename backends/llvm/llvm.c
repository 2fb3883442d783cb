/*
 * llvm.c — the LLVM backend plugin: optimised, vectorised kernels built
 * directly as LLVM IR through the LLVM-C API (LLVM 14).
 *
 * What is compiled.  Every kernel kind becomes machine code: ELEMWISE,
 * REDUCE, LOOP and RECUR (the ones with a scalar program), GATHER, JOIN,
 * SCATTER and DOT.  For each kernel
 * one LLVM module holds a few *row functions*, each a single loop over one
 * row of the (coalesced) iteration space:
 *
 *     void kiln_ec(int64_t n, void **ptrs, const int64_t *st,
 *                  const kiln_runtime *rt, void *acc)
 *
 *   kiln_ec / kiln_es   ELEMWISE, contiguous / strided: out[j] = prog(j)
 *   kiln_rc / kiln_rs   REDUCE into one scalar: *acc = fold(prog(j)), in
 *                       order, from the identity (the interpreter's block
 *                       accumulator: double for f32)
 *   kiln_uc / kiln_us   REDUCE along a kept axis: o[j] = op(o[j], prog(j))
 *                       (not emitted when reduce_axes covers every axis)
 *   kiln_gk / kiln_gc   GATHER: check a row of indices / copy x[idx[j]]
 *   kiln_jc / kiln_js   JOIN: copy a row into the output's slice,
 *                       contiguous (memcpy) / strided
 *   kiln_sk / kiln_sc   SCATTER: check a row of indices / set or add the
 *                       values at x[..., idx[j], ...] (one element or one
 *                       row of a sub-array per index), in order
 *   kiln_db / kiln_dl   DOT: call rt->dgemm/sgemm with the arguments in
 *                       st / the interpreter's triple loop (strides BLAS
 *                       cannot take)
 *   kiln_lc / kiln_ls   LOOP (ABI 1.5): each output by its role: ITER
 *                       stored, REDUCE folded into acc (8 bytes per
 *                       output), SCATTER added at its index
 *   kiln_luc / kiln_lus LOOP whose REDUCE outputs fold along a kept axis
 *   kiln_lk             LOOP: the index check, *acc = 1 when an index of
 *                       the row (a TAKE's, a SCATTER's) is out of range
 *   kiln_rr             RECUR with a program (ABI 1.10, recur.c): the
 *                       whole scan, T steps with the carries in phis
 *                       (n = T, st[v] = view v's axis-0 stride)
 *   kiln_n0 .. kiln_n3  loop nests (nest.c): an outer loop over the rows
 *                       of a 2-D space calling kiln_ec/es (lc/ls), or
 *                       kiln_uc/us (luc/lus), each view stepped by its
 *                       own outer stride (st[3 nv + v], bytes)
 *
 * `ptrs` holds one base pointer per view (inputs, then outputs), `st` the
 * inner strides in elements (strided versions only).  The signature is
 * fixed, whatever the kernel's width (design invariant 1).  The
 * contiguous versions mark input loads and output stores with disjoint
 * alias scopes (`!alias.scope`/`!noalias`), so LLVM vectorises them with
 * no run-time overlap checks and for any number of inputs; the element-
 * for-element aliasing the ABI allows (an in-place update) is safe under
 * that promise because every element is loaded before it is stored and no
 * other index touches it.
 *
 * LOOP kernels: KILN_I_TAKE loads from a TABLE view's base pointer at
 * index * stride; tables and scatter targets are not walked, their
 * element strides and extents follow the inner strides in st (st[nv + v],
 * st[2 nv + v]).  Each 256-element block of the interpreter's loop walk
 * is checked by kiln_lk first; a block that fails is run by the
 * interpreter's own loop body, which reports its exact message.  A
 * SCATTER output runs in a register (kl_emit_scatter_run): while its
 * index repeats the row adds into the target's value held in a
 * register, storing it and loading the next target when the index
 * changes and at the end of the row (each SCATTER output its own run;
 * the same additions in the same order; segmented rows add through
 * memory).  A prepared LOOP over one row of at most one block whose
 * REDUCE outputs are single elements skips the walk (kl_loop1_init,
 * kl_run_loop1): identity, kiln_lk, the row (kiln_ls with stride 0 for a
 * broadcast input), the block's combination, MEAN's division; a failed
 * check falls back to the walk.
 *
 * The view checks, the coalescing, the 256-element reduction blocks, the
 * output initialisation, MEAN's division and the error messages are the
 * interpreter's own code (this file includes backends/interp/interp.c),
 * so the order of every floating-point operation is the interpreter's
 * and results agree bit for bit.  The walk over the outer dimensions is
 * the kernel's own loop nest (nest.c: slices, steps, transposes, row
 * broadcasts, any view that does not coalesce to one row) for
 * ELEMWISE, REDUCE and a LOOP that checks no index; the interpreter's
 * walk still drives reductions along rows longer than one block (its
 * blocks fix the order of the sum), checked LOOPs and long broadcast
 * rows.  A
 * row whose views are contiguous runs the contiguous function; on the
 * walk, a row whose inputs are contiguous or broadcast (inner stride 0)
 * runs it too, the broadcast values splatted into small stack buffers;
 * other rows run the strided function.
 *
 * A program of more than KL_SEG instructions is cut into segment
 * functions called per strip of the row (segment.c):
 * code generation is superlinear in the size of one loop body.
 *
 * JOIN, SCATTER and DOT: each has a *plan* (kl_jplan, kl_splan,
 * kl_dplan), everything that does not depend on the data — the
 * interpreter's shape checks and coalesced walks, the row functions' st
 * arrays, BLAS's transpose flags and leading dimensions — made once per
 * shape signature by a prepared call (ABI 1.4), or on the stack by an
 * unprepared one; a steady-state call then only swaps pointers and calls
 * rows.  Messages are the interpreter's (its check functions, split out
 * of its runners, are called here); an index out of range is found by
 * the compiled check and reported by the interpreter's.  A SCATTER whose
 * per-index sub-array does not coalesce to one row runs on the embedded
 * interpreter; so does a sub-array GATHER.
 *
 * fast_math (off by default): function attributes for the code generator
 * (unsafe-fp-math, no-signed-zeros, approx-func, less-precise-fpmad) and
 * forced vectorisation of reductions into a scalar, which lets the loop
 * vectoriser reorder the fold (kl_loop_md); results then agree with the
 * interpreter within a tolerance, not bitwise.
 *
 * Math: + - * / sqrt fabs and comparisons are inline (sqrt through
 * llvm.sqrt, which is correctly rounded like libm's); every other
 * function is called through the runtime table (call->rt), so results are
 * the interpreter's digits and the code embeds no addresses.
 *
 * The artifact is an ELF object file in memory, emitted by a target
 * machine for the host CPU, behind a small header and a copy of the
 * kernel description; load and load_bytes are one function that links the
 * object with kiln's own ELF loader (core/plugin/objload.c; memcpy, memmove and
 * memset, which LLVM may call, are imported).
 *
 * The files.  This file holds the overview, the constants and kl_fail;
 * the code is in the parts it #includes at its end, one concept a file
 * (backends/llvm/), each saying which module compiles it.  They stay one
 * translation unit per module with the embedded interpreter, whose static
 * kiln_interp_* functions they call.  Prefix: kl_ throughout.
 *
 * Thread safety: one LLVMContext, module, target machine and JIT per
 * compile or callable; the process-wide LLVM set-up (targets, the
 * alias-set saturation threshold) runs once under pthread_once before any
 * compile.  The descriptor carries KILN_BACKEND_THREAD_SAFE.
 */
#define _GNU_SOURCE     /* dladdr (front.c) */
#ifdef HAVE_CONFIG_H
#include "config.h"     /* KILN_LLVM_VERSION */
#endif
#define KILN_INTERP_BUILTIN 1   /* the embedded interpreter's entry is not ours */
#include "../interp/interp.c"

#ifndef KL_FRONT
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#endif

#include <pthread.h>
#ifdef KL_FRONT
#include "objload.h"   /* core/plugin/objload.h: kiln's ELF object loader */
#endif

#define KL_BUILD_ID "llvm-4"
#define KL_MAGIC 0x564c4c4bu  /* "KLLV" */
#define KL_FORMAT 3u   /* 2: LOOP kernels carry their roles; 3: RECUR
                          kernels their n_carry, n_seq, n_steps */
#define KL_SPLAT 256          /* elements of one broadcast splat buffer */
#define KL_MAX_SPLAT 16       /* broadcast inputs splatted per row */
#define KL_MAX_ACC 64         /* outputs of one reduction (accumulators) */
#define KL_SEG 512            /* instructions of one segment ("Wide programs") */

#ifndef KILN_LLVM_VERSION
#define KILN_LLVM_VERSION "14"
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static int kl_fail(kiln_plugin_error **err, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err)
        *err = kiln_interp_error_new(code, "llvm: %s", msg);
    return code;
}

/* The parts, in the order of a kernel's life: LLVM set up, the kernel's
 * description and what both modules ask of it; the code generator (the
 * compiler module); the plugin's callables and runners; each data-movement
 * kind's row functions and runner; the module built by kind; calls; and
 * last the module's own table (llvm_codegen.so) or the plugin's entry
 * (llvm.so, front.c).  Each half only compiles its own side (KL_FRONT). */
#include "setup.c"      /* codegen: LLVM's process-wide set-up */
#include "desc.c"       /* both: the description inside the artifact */
#include "kernel.c"     /* both: roles, reductions, kinds, checks */
#include "cg.c"         /* codegen: state, types, constants, casts */
#include "vmath.c"      /* codegen: f32 exp/log/tanh/sigmoid inline */
#include "instr.c"      /* codegen: one instruction, the program, folds */
#include "rows.c"       /* codegen: ELEMWISE, REDUCE, LOOP row functions */
#include "strips.c"     /* codegen: folds into scalars in strips */
#include "segment.c"    /* codegen: wide programs in segments */
#include "rowfn.c"      /* codegen: data-movement row helpers */
#include "load.c"       /* plugin: callables (ELF object loaded) */
#include "run.c"        /* plugin: ELEMWISE, REDUCE, LOOP runs */
#include "nest.c"       /* both: loop nests over strided rows */
#include "gather.c"     /* GATHER: rows / runner */
#include "join.c"       /* JOIN: rows / runner and plan */
#include "scatter.c"    /* SCATTER: rows / runner and plan */
#include "dot.c"        /* DOT: rows / runner and plan */
#include "recur.c"      /* RECUR with a program: kiln_rr rows / runner */
#include "build.c"      /* codegen: the module by kind, object, IR text */
#include "call.c"       /* plugin: prepared and plain calls by kind */
#ifndef KL_FRONT
#include "module.c"     /* codegen: compile, warm-up, exit gate, table */
#else
#include "front.c"      /* plugin: the compiler module, target, entry */
#endif
