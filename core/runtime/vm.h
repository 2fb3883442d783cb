/*
 * vm.h — internal access to a compiled function (prefix kiln_vm_), for
 * the parts of libkiln built on top of kiln_function_call (the sampler
 * callback, gradient checks).
 */
#ifndef KILN_CORE_VM_H
#define KILN_CORE_VM_H

#include "ir.h"

/* The function's own copy of its graph (owned by f; read only).  Its
 * inputs, in declaration order, are its nodes with op KILN_OP_INPUT in
 * node order; its outputs are g->outputs; g->grads records which nodes
 * are gradients of which. */
const kiln_graph *kiln_vm_graph(const kiln_function *f);

/* State that the sampler callbacks (callback.c) keep with f: `ctx` is
 * freed with free_fn(ctx) by kiln_function_free.  Setting replaces the
 * pointer without freeing the old one. */
void *kiln_vm_callback_ctx(const kiln_function *f);

/* The per-kernel backend decisions f was compiled with (core/policy/policy.c;
 * owned by f), NULL only while compiling. */
struct kiln_plan;
const struct kiln_plan *kiln_vm_plan(const kiln_function *f);
void kiln_vm_set_callback_ctx(kiln_function *f, void *ctx,
                              void (*free_fn)(void *));

#endif
