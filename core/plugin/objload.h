/*
 * objload.h — kiln's in-memory loader for ELF64 x86-64 relocatable
 * objects (prefix kiln_obj_).
 *
 * Backends store compiled kernels as relocatable objects (`.o`, ET_REL):
 * the tcc backend's artifact bytes hold one made by libtcc, the llvm
 * backend's one made by LLVM's target machine.  kiln_obj_load turns such
 * an object, given as bytes in memory, into code that can be called,
 * without a compiler library (libtcc, libLLVM), a temporary file or the
 * dynamic linker:
 *
 *  - the SHF_ALLOC sections are laid out in one anonymous mmap'd region
 *    (three page-aligned parts: code, read-only data, writable data),
 *    together with a GOT and an 8-byte jump stub per external function,
 *    so every PC-relative reference (±2 GiB) is in range wherever the
 *    region lands;
 *  - relocations are applied as the System V AMD64 psABI ("System V
 *    Application Binary Interface, AMD64 Architecture Processor
 *    Supplement", §4.4 Relocation, Table 4.9 Relocation Types) defines
 *    them — the small-model types gcc and tcc emit (64, PC32, PLT32, 32,
 *    32S, PC64, GOTPCREL, GOTPCRELX, REX_GOTPCRELX, 16, PC16, 8, PC8,
 *    SIZE32, SIZE64) and the large-model types LLVM emits for JIT code
 *    (GOTPC64, GOTOFF64, GOT64, GOTPCREL64, GOTPC32, PLTOFF64, GOTPLT64);
 *  - undefined symbols are resolved from the caller's import table first,
 *    then with dlsym(RTLD_DEFAULT, name) only when the caller allows it;
 *    `_GLOBAL_OFFSET_TABLE_` is the region's GOT;
 *  - W^X: the region is written and relocated while read + write, then
 *    code becomes read + execute and read-only data (and the GOT) read-
 *    only; no page is ever writable and executable at once.
 *
 * What is refused, with a message: anything but ELF64 little-endian
 * x86-64 ET_REL; thread-local storage (SHF_TLS sections such as .tbss,
 * STT_TLS symbols, TLS relocation types); SHT_REL sections; constructors
 * and destructors (.init_array, .fini_array, .ctors, .dtors: nothing
 * would run them); extended section numbering (SHN_XINDEX); alignment
 * above a page; dynamic relocation types; a relocation whose value does
 * not fit its field (e.g. R_X86_64_32 against an address above 4 GiB).
 * COMDAT groups (SHT_GROUP) are accepted: one object holds one copy of
 * each group, so its members load as ordinary sections.
 *
 * Not supported on purpose: `.eh_frame` (and its relocations) is not
 * loaded and no unwind information is registered, so nothing can unwind
 * through loaded code (no C++ exceptions, no backtrace() across a
 * kernel; kernels are C and return error codes).  No debugger
 * registration.  Objects compiled with -fno-pic -mcmodel=small that use
 * absolute 32-bit addresses (R_X86_64_32/32S) are placed below 2 GiB with
 * MAP_32BIT; their references to external data must be reachable with 32
 * bits or the load fails.
 *
 * Robustness: the image is untrusted input.  Every offset, size, count,
 * index, alignment and string of the ELF file is checked against the
 * image before use (no structure is read in place: unaligned images are
 * fine), so truncated or corrupted bytes give an error message and never
 * a crash or an out-of-bounds read.  The loader cannot know whether the
 * *contents* of a section (machine code, constants) are what the producer
 * wrote: that is the disk cache's checksum's job.
 *
 * No global state; every function is thread-safe (calls on distinct
 * kiln_obj objects, or concurrent kiln_obj_symbol calls on one object);
 * nothing aborts or exits.  Depends on libc and libdl only, so a plugin
 * links its own copy (like core/lower/emit_c.c).
 */
#ifndef KILN_CORE_OBJLOAD_H
#define KILN_CORE_OBJLOAD_H

#include <stddef.h>

/* A loaded object: its mapped region and its global symbols.  Opaque;
 * freed with kiln_obj_free. */
typedef struct kiln_obj kiln_obj;

/* One symbol the caller supplies: `name` resolves to `addr`.  Both are
 * the caller's; they are read during kiln_obj_load only. */
typedef struct kiln_obj_import {
    const char *name;
    const void *addr;
} kiln_obj_import;

/* Options of one load (caller-owned, read during kiln_obj_load only).
 * A NULL options pointer means: no imports, no dlsym. */
typedef struct kiln_obj_options {
    const kiln_obj_import *imports;  /* n_imports entries, searched first;
                                        the first entry with a name wins */
    size_t n_imports;
    int allow_dlsym;   /* 1: names not in `imports` are looked up with
                          dlsym(RTLD_DEFAULT, name) (e.g. memcpy and
                          memset, which LLVM may emit); 0: they are errors
                          (weak undefined symbols resolve to 0) */
} kiln_obj_options;

/* Load the ELF64 x86-64 relocatable object image[0..len) (any alignment;
 * not used after the call returns) and return it in *out.
 *
 * Returns 0 and sets *out (free it with kiln_obj_free), or a nonzero
 * kiln_code — KILN_ERR_BACKEND for an image that is not a loadable
 * object (truncated, corrupted, an unsupported feature, an unresolved
 * symbol, a relocation out of range), KILN_ERR_NOMEM when memory or a
 * mapping cannot be had, KILN_ERR_ARG for NULL arguments — with *out set
 * to NULL and a one-line message in errbuf (errbuf_size bytes, always
 * NUL-terminated when errbuf_size > 0; may be NULL).  Messages start with
 * "object: ". */
int kiln_obj_load(const void *image, size_t len,
                  const kiln_obj_options *opt, kiln_obj **out, char *errbuf,
                  size_t errbuf_size);

/* The address of the defined global (STB_GLOBAL or STB_WEAK) symbol
 * `name` of `o`, or NULL when there is none (or o/name is NULL).  The
 * address stays valid until kiln_obj_free(o).  A function's address
 * converts to a function pointer with memcpy (ISO C has no cast):
 *     void *p = kiln_obj_symbol(o, "kiln_kernel");
 *     kiln_kernel_fn fn;  memcpy(&fn, &p, sizeof fn);  */
void *kiln_obj_symbol(const kiln_obj *o, const char *name);

/* Bytes mapped for `o` (code, data, GOT and stubs, page-rounded); 0 for
 * NULL. */
size_t kiln_obj_size(const kiln_obj *o);

/* Unmap the region and free `o`.  NULL is a no-op.  No code of `o` may
 * run during or after the call. */
void kiln_obj_free(kiln_obj *o);

#endif
