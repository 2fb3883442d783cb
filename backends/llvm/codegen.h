/*
 * codegen.h — the interface between the llvm plugin (llvm.so: loading,
 * running, the embedded interpreter; no libLLVM) and its compiler module
 * (llvm_codegen.so: LLVM IR, optimisation, code generation; links
 * libLLVM).  Both are built from backends/llvm/llvm.c (the plugin with
 * -DKL_FRONT).  The plugin dlopens the compiler module the first time a
 * kernel must be compiled or printed, so a process whose kernels all come
 * from the disk cache never loads libLLVM (~29 ms, ~49 MB).
 *
 * The functions have the meaning of the kiln_backend entry points of the
 * same names (include/kiln/backend.h); artifacts, texts and errors they
 * return belong to the compiler module and are freed through this table.
 */
#ifndef KILN_LLVM_CODEGEN_H
#define KILN_LLVM_CODEGEN_H

#include <kiln/backend.h>

#define KL_CODEGEN_ENTRY "kiln_llvm_codegen_entry"

typedef struct kl_codegen_table {
    size_t struct_size;
    int (*compile)(const kiln_kernel *k, const kiln_compile_options *opt,
                   kiln_artifact **out, kiln_plugin_error **err);
    const void *(*artifact_bytes)(const kiln_artifact *a, size_t *len);
    void (*artifact_free)(kiln_artifact *a);
    int (*emit_text)(const kiln_kernel *k, const kiln_compile_options *opt,
                     char **text, kiln_plugin_error **err);
    void (*text_free)(char *text);
    void (*error_free)(kiln_plugin_error *e);
    /* libLLVM's one-time set-up (targets, options, a warm-up compile) on
     * the calling thread: the backend's compiler_init (ABI 1.6) */
    int (*init)(kiln_plugin_error **err);
} kl_codegen_table;

typedef const kl_codegen_table *(*kl_codegen_entry_fn)(void);

#endif
