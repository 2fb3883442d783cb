/*
 * bs_trailer.h — the trailer that `kiln bridgestan` (tools/kiln_bridgestan.c)
 * appends to a copy of the BridgeStan template library and that the
 * template (tools/bridgestan_shim.c) reads back at bs_model_construct.
 * docs/bridgestan.md, "The trailer", is the specification:
 *
 *   [template library, unchanged][model text][data][metadata][footer, 40 B]
 *
 *   model text  the .kg file's bytes as parsed (no NUL byte)
 *   data        the data files the model reads (npy(), csv(), json()),
 *               bound at build time: for each, its resolved path
 *               (NUL-terminated), a little-endian u64 size, its bytes
 *   metadata    BST_NFIELDS_SERIAL or BST_NFIELDS NUL-terminated
 *               strings, in this order: the logp output's name ("" =
 *               kiln_model_new's default), the graph's name, the absolute
 *               directory of the model file (base_dir of its data files; a
 *               relative one is refused), the model file's name, and in a
 *               library made for MPI (bridgestan-mpi.so, `kiln bridgestan
 *               --mpi-axis N`) a fifth: the observation axis
 *   footer      little-endian u64 text_len, u64 meta_len,
 *               u64 checksum (FNV-1a 64 over the text, the data, then the
 *               metadata), u32 version (BST_VERSION), u32 data_len,
 *               8 bytes BST_MAGIC
 *
 * ELF loaders map only what the program headers name, so the bytes after
 * the template are never loaded as code.  Header-only (static inline) so
 * that the writer and the reader share one definition.
 */
#ifndef KILN_TOOLS_BS_TRAILER_H
#define KILN_TOOLS_BS_TRAILER_H

#include <kiln/io.h>   /* kiln_memfile */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BST_MAGIC "KILN-BS\x01"      /* 8 bytes, the last of the file */
#define BST_MAGIC_LEN 8
#define BST_VERSION 2u               /* 2: the data region */
#define BST_FOOTER 40                /* bytes */
#define BST_NFIELDS 5                /* at most: the last is optional */
#define BST_NFIELDS_SERIAL 4         /* a serial library's metadata */
/* Sizes the reader accepts: a model's text is at most 1 GiB (the default
 * data size limit of <kiln/io.h>), its metadata at most 64 KiB. */
#define BST_TEXT_MAX ((uint64_t)1 << 30)
#define BST_META_MAX ((uint64_t)1 << 16)
/* The data region (all bound files with their paths) is at most 1 GiB. */
#define BST_DATA_MAX ((uint64_t)1 << 30)

enum { BST_LOGP = 0, BST_GRAPH = 1, BST_BASE_DIR = 2, BST_FILE = 3,
       BST_MPI_AXIS = 4 };

typedef struct bst_footer {
    uint64_t text_len, meta_len, checksum;
    uint32_t version;
    uint32_t data_len;
} bst_footer;

static inline uint64_t bst_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define BST_FNV_INIT 0xcbf29ce484222325ull

static inline void bst_put(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t bst_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void bst_footer_encode(unsigned char out[BST_FOOTER],
                                     const bst_footer *f)
{
    bst_put(out, f->text_len, 8);
    bst_put(out + 8, f->meta_len, 8);
    bst_put(out + 16, f->checksum, 8);
    bst_put(out + 24, f->version, 4);
    bst_put(out + 28, f->data_len, 4);
    memcpy(out + 32, BST_MAGIC, BST_MAGIC_LEN);
}

/* 1 when the last BST_FOOTER bytes of a file end with the magic (the file
 * carries a trailer; the fields are in *f, not yet checked), else 0. */
static inline int bst_footer_decode(const unsigned char in[BST_FOOTER],
                                    bst_footer *f)
{
    if (memcmp(in + 32, BST_MAGIC, BST_MAGIC_LEN) != 0)
        return 0;
    f->text_len = bst_get(in, 8);
    f->meta_len = bst_get(in + 8, 8);
    f->checksum = bst_get(in + 16, 8);
    f->version = (uint32_t)bst_get(in + 24, 4);
    f->data_len = (uint32_t)bst_get(in + 28, 4);
    return 1;
}

/* One entry of the data region d[0..len) at *at: its path, bytes and
 * size, *at moved past it.  1, 0 at the end, -1 when corrupt. */
static inline int bst_data_next(const unsigned char *d, uint64_t len,
                                uint64_t *at, const char **path,
                                const unsigned char **bytes, uint64_t *size)
{
    if (*at == len)
        return 0;
    const unsigned char *nul = memchr(d + *at, 0, (size_t)(len - *at));
    if (!nul || nul == d + *at)
        return -1;
    uint64_t p = (uint64_t)(nul - d) + 1;
    if (len - p < 8)
        return -1;
    uint64_t n = bst_get(d + p, 8);
    if (n > len - p - 8)
        return -1;
    *path = (const char *)(d + *at);
    *bytes = d + p + 8;
    *size = n;
    *at = p + 8 + n;
    return 1;
}

/* The data region d[0..len) as kiln_memfile entries (pointing into d):
 * *out (malloc'd, NULL when empty; free it) and *n.  0, -1 when the region
 * is corrupt, -2 when out of memory. */
static inline int bst_data_memfiles(const unsigned char *d, uint64_t len,
                                    kiln_memfile **out, size_t *n)
{
    kiln_memfile *mf = NULL;
    size_t k = 0, cap = 0;
    for (uint64_t at = 0;;) {
        const char *path;
        const unsigned char *bytes;
        uint64_t size;
        int r = bst_data_next(d, len, &at, &path, &bytes, &size);
        if (r <= 0) {
            if (r < 0) {
                free(mf);
                mf = NULL;
                k = 0;
            }
            *out = mf;
            *n = k;
            return r;
        }
        if (k == cap) {
            /* doubling: 200k tiny entries (a crafted trailer) were
             * quadratic where realloc moves, as under ASan */
            cap = cap ? 2 * cap : 8;
            kiln_memfile *q = realloc(mf, cap * sizeof *q);
            if (!q) {
                free(mf);
                *out = NULL;
                *n = 0;
                return -2;
            }
            mf = q;
        }
        mf[k].path = path;
        mf[k].data = bytes;
        mf[k].size = (size_t)size;
        k++;
    }
}

/* 1 when the metadata's base_dir is an absolute path (the data files of a
 * library never resolve against its caller's working directory). */
static inline int bst_base_dir_ok(const char *base_dir)
{
    return base_dir[0] == '/';
}

/* Split metadata of `len` bytes into its strings (pointers into meta):
 * BST_NFIELDS_SERIAL of them (then field[BST_MPI_AXIS] is "") or
 * BST_NFIELDS.  0, or -1 when it is not exactly that many NUL-terminated
 * strings. */
static inline int bst_meta_split(const char *meta, uint64_t len,
                                 const char *field[BST_NFIELDS])
{
    uint64_t at = 0;
    field[BST_MPI_AXIS] = "";
    for (int i = 0; i < BST_NFIELDS; i++) {
        if (i == BST_NFIELDS_SERIAL && at == len)
            return 0;
        const char *nul = at < len ? memchr(meta + at, 0, (size_t)(len - at))
                                   : NULL;
        if (!nul)
            return -1;
        field[i] = meta + at;
        at = (uint64_t)(nul - meta) + 1;
    }
    return at == len ? 0 : -1;
}

#endif
