/*
 * objload.c — kiln's in-memory loader for ELF64 x86-64 relocatable
 * objects (core/plugin/objload.h has the contract).
 *
 * Written for kiln from the ELF specification (System V gABI, "Sections",
 * "Symbol Table", "Relocation") and the System V AMD64 psABI (§4.4,
 * relocation types and their calculations).  Notation of the psABI used in
 * the comments below:
 *
 *   A  the addend           P  the place (address) being relocated
 *   S  the symbol's value   L  the symbol's PLT entry (here: its stub)
 *   G  the offset of the symbol's GOT entry from the GOT's start
 *   GOT the GOT's address   Z  the symbol's size
 *
 * Steps of a load: check the ELF header and the section header table;
 * classify sections (code, read-only data, writable data, ignored,
 * refused); check the symbol table; walk every relocation that applies to
 * a loaded section once to check it and to count GOT entries and stubs;
 * lay the region out; map it read + write; copy the sections; resolve the
 * symbols that relocations reference; fill the GOT and the stubs; apply
 * the relocations; mprotect; keep the global symbols.
 *
 * Nothing is read from the image in place: structures are copied out with
 * memcpy after a bounds check, so the image may have any alignment and
 * every read stays inside [image, image + len).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* MAP_32BIT, RTLD_DEFAULT */
#endif
#include "objload.h"

#include <kiln/kiln.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) || !defined(__LP64__)
#error "core/plugin/objload.c loads x86-64 code and must run on x86-64"
#endif

/* Relocation types of the psABI that <elf.h> of older C libraries may
 * not name. */
#ifndef R_X86_64_GOTPCRELX
#define R_X86_64_GOTPCRELX 41
#endif
#ifndef R_X86_64_REX_GOTPCRELX
#define R_X86_64_REX_GOTPCRELX 42
#endif
#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001
#endif

#define OBJ_MAX_REGION ((size_t)1 << 30)  /* bytes mapped per object */
#define OBJ_STUB_SIZE 8                   /* jmp *GOT(%rip); int3; int3 */
#define OBJ_GOT_NAME "_GLOBAL_OFFSET_TABLE_"

enum { PART_TEXT = 0, PART_RODATA = 1, PART_DATA = 2, N_PARTS = 3 };

struct kiln_obj {
    unsigned char *mem;      /* the region */
    size_t size;
    size_t n_syms;
    struct kiln_obj_sym {
        const char *name;    /* into names */
        void *addr;
    } *syms;
    char *names;
};

typedef struct ld_sec {
    Elf64_Shdr h;
    int part;                /* PART_*, or -1: not loaded */
    size_t off;              /* offset in the region */
} ld_sec;

typedef struct ld_sym {
    uint64_t addr;           /* S, once resolved */
    int32_t got;             /* GOT entry index, -1 none */
    int32_t stub;            /* stub index, -1 none */
    uint8_t used;            /* referenced by an applied relocation */
    uint8_t ext;             /* undefined here: resolved from outside */
    uint8_t resolved;
} ld_sym;

typedef struct ld {
    const unsigned char *img;
    size_t len;
    char *err;
    size_t errsz;
    const kiln_obj_options *opt;
    size_t page;
    Elf64_Ehdr eh;
    ld_sec *sec;
    size_t nsec;
    size_t shstr;            /* section index of the section names */
    size_t symtab;           /* section index of the symbol table */
    size_t nsym;
    size_t strtab;           /* section index of the symbol names */
    ld_sym *sym;
    size_t n_got, n_stub;
    int need_low;            /* absolute 32-bit relocations: map < 2 GiB */
    size_t part_off[N_PARTS], part_len[N_PARTS];
    size_t stub_off, got_off, common_end;
    unsigned char *mem;
    size_t size;
} ld;

static int ld_fail(ld *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int ld_fail(ld *l, int code, const char *fmt, ...)
{
    if (l->err && l->errsz) {
        int n = snprintf(l->err, l->errsz, "object: ");
        if (n >= 0 && (size_t)n < l->errsz) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(l->err + n, l->errsz - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

#define BAD(...) ld_fail(l, KILN_ERR_BACKEND, __VA_ARGS__)

/* The text of errno value e (strerror is not thread-safe). */
static const char *ld_strerror(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n);   /* the GNU variant (_GNU_SOURCE) */
}

/* [off, off + n) lies inside the image. */
static int ld_in(const ld *l, uint64_t off, uint64_t n)
{
    return off <= l->len && n <= l->len - off;
}

/* A NUL-terminated string at offset `off` of string-table section `s`,
 * or NULL when the section is not a string table inside the image or the
 * string is not terminated inside it. */
static const char *ld_str(const ld *l, size_t s, uint64_t off)
{
    if (s == 0 || s >= l->nsec)
        return NULL;
    const Elf64_Shdr *h = &l->sec[s].h;
    if (h->sh_type != SHT_STRTAB || off >= h->sh_size)
        return NULL;
    const char *p = (const char *)l->img + h->sh_offset + off;
    if (!memchr(p, 0, (size_t)(h->sh_size - off)))
        return NULL;
    return p;
}

static const char *ld_secname(const ld *l, size_t i)
{
    const char *n = ld_str(l, l->shstr, l->sec[i].h.sh_name);
    return n ? n : "?";
}

static void ld_getsym(const ld *l, size_t i, Elf64_Sym *s)
{
    memcpy(s, l->img + l->sec[l->symtab].h.sh_offset + i * sizeof *s,
           sizeof *s);
}

/* ------------------------------------------------------------------ */
/* Header and sections                                                  */
/* ------------------------------------------------------------------ */

static int ld_header(ld *l)
{
    if (l->len < sizeof l->eh)
        return BAD("%zu bytes are too short for an ELF header", l->len);
    memcpy(&l->eh, l->img, sizeof l->eh);
    const Elf64_Ehdr *e = &l->eh;
    if (memcmp(e->e_ident, ELFMAG, SELFMAG) != 0)
        return BAD("not an ELF file (bad magic)");
    if (e->e_ident[EI_CLASS] != ELFCLASS64)
        return BAD("not a 64-bit ELF file (class %u)", e->e_ident[EI_CLASS]);
    if (e->e_ident[EI_DATA] != ELFDATA2LSB)
        return BAD("not a little-endian ELF file");
    if (e->e_ident[EI_VERSION] != EV_CURRENT || e->e_version != EV_CURRENT)
        return BAD("unknown ELF version");
    if (e->e_machine != EM_X86_64)
        return BAD("machine %u is not x86-64", e->e_machine);
    if (e->e_type != ET_REL)
        return BAD("ELF type %u is not a relocatable object (ET_REL)",
                   e->e_type);
    if (e->e_shentsize != sizeof(Elf64_Shdr))
        return BAD("section header size %u, want %zu", e->e_shentsize,
                   sizeof(Elf64_Shdr));
    if (e->e_shnum == 0)
        return BAD("no section headers (or extended numbering, which is "
                   "not supported)");
    if (e->e_shnum >= SHN_LORESERVE)
        return BAD("%u sections: reserved section numbers", e->e_shnum);
    if (e->e_shstrndx == SHN_XINDEX || e->e_shstrndx >= e->e_shnum)
        return BAD("section name table index %u out of range",
                   e->e_shstrndx);
    if (!ld_in(l, e->e_shoff, (uint64_t)e->e_shnum * sizeof(Elf64_Shdr)))
        return BAD("section header table (%u entries at offset %llu) "
                   "extends past the end of the %zu-byte image",
                   e->e_shnum, (unsigned long long)e->e_shoff, l->len);
    return 0;
}

static int ld_is_pow2(uint64_t a) { return (a & (a - 1)) == 0; }

/* Read and check the section header table; classify sections. */
static int ld_sections(ld *l)
{
    l->nsec = l->eh.e_shnum;
    l->sec = calloc(l->nsec, sizeof *l->sec);
    if (!l->sec)
        return ld_fail(l, KILN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < l->nsec; i++) {
        ld_sec *s = &l->sec[i];
        memcpy(&s->h, l->img + l->eh.e_shoff + i * sizeof(Elf64_Shdr),
               sizeof s->h);
        s->part = -1;
        if (i == 0)
            continue;
        if (s->h.sh_type != SHT_NOBITS && s->h.sh_type != SHT_NULL &&
            !ld_in(l, s->h.sh_offset, s->h.sh_size))
            return BAD("section %zu (%llu bytes at offset %llu) extends past "
                       "the end of the %zu-byte image", i,
                       (unsigned long long)s->h.sh_size,
                       (unsigned long long)s->h.sh_offset, l->len);
        if (!ld_is_pow2(s->h.sh_addralign))
            return BAD("section %zu: alignment %llu is not a power of two",
                       i, (unsigned long long)s->h.sh_addralign);
    }
    l->shstr = l->eh.e_shstrndx;
    if (l->sec[l->shstr].h.sh_type != SHT_STRTAB)
        return BAD("section name table %zu is not a string table", l->shstr);

    l->symtab = 0;
    for (size_t i = 1; i < l->nsec; i++) {
        ld_sec *s = &l->sec[i];
        const Elf64_Shdr *h = &s->h;
        const char *name = ld_str(l, l->shstr, h->sh_name);
        if (!name)
            return BAD("section %zu: name offset %u out of range", i,
                       h->sh_name);
        switch (h->sh_type) {
        case SHT_SYMTAB:
            if (l->symtab)
                return BAD("more than one symbol table");
            l->symtab = i;
            continue;
        case SHT_REL:
            return BAD("section %s: SHT_REL relocations are not used on "
                       "x86-64 (want SHT_RELA)", name);
        case SHT_SYMTAB_SHNDX:
            return BAD("extended section indices (%s) are not supported",
                       name);
        case SHT_INIT_ARRAY:
        case SHT_FINI_ARRAY:
        case SHT_PREINIT_ARRAY:
            return BAD("section %s: constructors and destructors are not "
                       "supported (nothing would run them)", name);
        case SHT_DYNAMIC:
        case SHT_DYNSYM:
        case SHT_HASH:
        case SHT_GNU_HASH:
            return BAD("section %s belongs to a shared object, not to a "
                       "relocatable object", name);
        default:
            break;
        }
        if (!(h->sh_flags & SHF_ALLOC))
            continue;                 /* debug info, notes, comments */
        if (h->sh_flags & SHF_TLS)
            return BAD("section %s: thread-local storage is not supported",
                       name);
        if (h->sh_type == SHT_NOTE || h->sh_type == SHT_GROUP)
            continue;                 /* .note.gnu.property; COMDAT groups */
        if (h->sh_type == SHT_X86_64_UNWIND || strcmp(name, ".eh_frame") == 0)
            continue;                 /* no unwinding through loaded code */
        if (h->sh_type != SHT_PROGBITS && h->sh_type != SHT_NOBITS)
            return BAD("section %s: allocated section of type %#x is not "
                       "supported", name, h->sh_type);
        if (!strcmp(name, ".ctors") || !strcmp(name, ".dtors") ||
            !strncmp(name, ".ctors.", 7) || !strncmp(name, ".dtors.", 7) ||
            !strcmp(name, ".init") || !strcmp(name, ".fini"))
            return BAD("section %s: constructors and destructors are not "
                       "supported (nothing would run them)", name);
        if (h->sh_addralign > l->page)
            return BAD("section %s: alignment %llu above the page size",
                       name, (unsigned long long)h->sh_addralign);
        if ((h->sh_flags & SHF_EXECINSTR) && (h->sh_flags & SHF_WRITE))
            return BAD("section %s is writable and executable", name);
        if (h->sh_flags & SHF_EXECINSTR) {
            if (h->sh_type == SHT_NOBITS)
                return BAD("section %s: executable without contents", name);
            s->part = PART_TEXT;
        } else if (h->sh_flags & SHF_WRITE || h->sh_type == SHT_NOBITS) {
            s->part = PART_DATA;
        } else {
            s->part = PART_RODATA;
        }
    }
    if (!l->symtab)
        return BAD("no symbol table");
    const Elf64_Shdr *st = &l->sec[l->symtab].h;
    if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_size % sizeof(Elf64_Sym))
        return BAD("symbol table: entry size %llu, size %llu (want "
                   "multiples of %zu)", (unsigned long long)st->sh_entsize,
                   (unsigned long long)st->sh_size, sizeof(Elf64_Sym));
    l->nsym = (size_t)(st->sh_size / sizeof(Elf64_Sym));
    if (l->nsym == 0)
        return BAD("empty symbol table");
    l->strtab = st->sh_link;
    if (l->strtab == 0 || l->strtab >= l->nsec ||
        l->sec[l->strtab].h.sh_type != SHT_STRTAB)
        return BAD("symbol table: string table index %zu is not a string "
                   "table", l->strtab);
    l->sym = calloc(l->nsym, sizeof *l->sym);
    if (!l->sym)
        return ld_fail(l, KILN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < l->nsym; i++)
        l->sym[i].got = l->sym[i].stub = -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Symbols                                                              */
/* ------------------------------------------------------------------ */

/* Check symbol i, as a relocation or the export table uses it: where it
 * is defined, and that its value lies inside its section. */
static int ld_check_sym(ld *l, size_t i, const Elf64_Sym *s)
{
    unsigned type = ELF64_ST_TYPE(s->st_info);
    if (type == STT_TLS)
        return BAD("symbol %zu: thread-local storage is not supported", i);
    if (type == STT_GNU_IFUNC)
        return BAD("symbol %zu: indirect functions (STT_GNU_IFUNC) are not "
                   "supported", i);
    uint16_t x = s->st_shndx;
    if (x == SHN_UNDEF || x == SHN_ABS)
        return 0;
    if (x == SHN_COMMON) {
        if (s->st_value == 0 || !ld_is_pow2(s->st_value) ||
            s->st_value > l->page)
            return BAD("symbol %zu: common symbol alignment %llu", i,
                       (unsigned long long)s->st_value);
        if (s->st_size > OBJ_MAX_REGION)
            return BAD("symbol %zu: common symbol of %llu bytes", i,
                       (unsigned long long)s->st_size);
        return 0;
    }
    if (x == SHN_XINDEX)
        return BAD("symbol %zu: extended section indices are not supported",
                   i);
    if (x >= l->nsec)
        return BAD("symbol %zu: section index %u out of range", i, x);
    if (l->sec[x].part < 0)
        return BAD("symbol %zu refers to section %s, which is not loaded",
                   i, ld_secname(l, x));
    if (s->st_value > l->sec[x].h.sh_size)
        return BAD("symbol %zu: value %llu past the end of section %s", i,
                   (unsigned long long)s->st_value, ld_secname(l, x));
    return 0;
}

/* ------------------------------------------------------------------ */
/* Relocations                                                          */
/* ------------------------------------------------------------------ */

enum {
    RK_BAD = 0,
    RK_NONE,
    RK_ABS,          /* S + A                 */
    RK_PC,           /* S + A - P             */
    RK_PLT,          /* L + A - P             */
    RK_GOTPCREL,     /* G + GOT + A - P       */
    RK_GOT,          /* G + A                 */
    RK_GOTOFF,       /* S + A - GOT           */
    RK_GOTPC,        /* GOT + A - P           */
    RK_PLTOFF,       /* L - GOT + A           */
    RK_SIZE          /* Z + A                 */
};

/* Width check of a field. */
enum { F_U64 = 0, F_S32, F_U32, F_B16, F_S16, F_B8, F_S8 };

typedef struct rinfo {
    int kind, field;
    const char *name;
} rinfo;

static rinfo ld_rinfo(uint32_t type)
{
    switch (type) {
    case R_X86_64_NONE: return (rinfo){RK_NONE, F_U64, "NONE"};
    case R_X86_64_64: return (rinfo){RK_ABS, F_U64, "64"};
    case R_X86_64_PC32: return (rinfo){RK_PC, F_S32, "PC32"};
    case R_X86_64_GOT32: return (rinfo){RK_GOT, F_S32, "GOT32"};
    case R_X86_64_PLT32: return (rinfo){RK_PLT, F_S32, "PLT32"};
    case R_X86_64_GOTPCREL: return (rinfo){RK_GOTPCREL, F_S32, "GOTPCREL"};
    case R_X86_64_32: return (rinfo){RK_ABS, F_U32, "32"};
    case R_X86_64_32S: return (rinfo){RK_ABS, F_S32, "32S"};
    case R_X86_64_16: return (rinfo){RK_ABS, F_B16, "16"};
    case R_X86_64_PC16: return (rinfo){RK_PC, F_S16, "PC16"};
    case R_X86_64_8: return (rinfo){RK_ABS, F_B8, "8"};
    case R_X86_64_PC8: return (rinfo){RK_PC, F_S8, "PC8"};
    case R_X86_64_PC64: return (rinfo){RK_PC, F_U64, "PC64"};
    case R_X86_64_GOTOFF64: return (rinfo){RK_GOTOFF, F_U64, "GOTOFF64"};
    case R_X86_64_GOTPC32: return (rinfo){RK_GOTPC, F_S32, "GOTPC32"};
    case R_X86_64_GOT64: return (rinfo){RK_GOT, F_U64, "GOT64"};
    case R_X86_64_GOTPCREL64:
        return (rinfo){RK_GOTPCREL, F_U64, "GOTPCREL64"};
    case R_X86_64_GOTPC64: return (rinfo){RK_GOTPC, F_U64, "GOTPC64"};
    case R_X86_64_GOTPLT64: return (rinfo){RK_GOT, F_U64, "GOTPLT64"};
    case R_X86_64_PLTOFF64: return (rinfo){RK_PLTOFF, F_U64, "PLTOFF64"};
    case R_X86_64_SIZE32: return (rinfo){RK_SIZE, F_U32, "SIZE32"};
    case R_X86_64_SIZE64: return (rinfo){RK_SIZE, F_U64, "SIZE64"};
    case R_X86_64_GOTPCRELX: return (rinfo){RK_GOTPCREL, F_S32, "GOTPCRELX"};
    case R_X86_64_REX_GOTPCRELX:
        return (rinfo){RK_GOTPCREL, F_S32, "REX_GOTPCRELX"};
    default: return (rinfo){RK_BAD, F_U64, NULL};
    }
}

static size_t ld_width(int field)
{
    switch (field) {
    case F_U64: return 8;
    case F_S32: case F_U32: return 4;
    case F_B16: case F_S16: return 2;
    default: return 1;
    }
}

/* The loaded section a relocation section applies to, or 0 when it
 * applies to a section that is not loaded (.eh_frame, debug info). */
static int ld_rela_target(ld *l, size_t i, size_t *target)
{
    const Elf64_Shdr *h = &l->sec[i].h;
    *target = 0;
    if (h->sh_info == 0 || h->sh_info >= l->nsec)
        return BAD("relocation section %s: target section %u out of range",
                   ld_secname(l, i), h->sh_info);
    if (l->sec[h->sh_info].part < 0)
        return 0;
    if (h->sh_link != l->symtab)
        return BAD("relocation section %s: symbol table %u is not the "
                   "symbol table", ld_secname(l, i), h->sh_link);
    if (h->sh_entsize != sizeof(Elf64_Rela) ||
        h->sh_size % sizeof(Elf64_Rela))
        return BAD("relocation section %s: entry size %llu, size %llu",
                   ld_secname(l, i), (unsigned long long)h->sh_entsize,
                   (unsigned long long)h->sh_size);
    if (l->sec[h->sh_info].h.sh_type == SHT_NOBITS && h->sh_size)
        return BAD("relocation section %s applies to %s, which has no "
                   "contents", ld_secname(l, i),
                   ld_secname(l, h->sh_info));
    *target = h->sh_info;
    return 0;
}

/* First pass over the relocations of loaded sections: check each one,
 * mark the symbols used, count GOT entries and stubs. */
static int ld_scan_relocs(ld *l)
{
    for (size_t i = 1; i < l->nsec; i++) {
        if (l->sec[i].h.sh_type != SHT_RELA)
            continue;
        size_t t;
        int rc = ld_rela_target(l, i, &t);
        if (rc)
            return rc;
        if (!t)
            continue;
        const Elf64_Shdr *h = &l->sec[i].h;
        uint64_t tsize = l->sec[t].h.sh_size;
        size_t n = (size_t)(h->sh_size / sizeof(Elf64_Rela));
        for (size_t r = 0; r < n; r++) {
            Elf64_Rela ra;
            memcpy(&ra, l->img + h->sh_offset + r * sizeof ra, sizeof ra);
            uint32_t type = (uint32_t)ELF64_R_TYPE(ra.r_info);
            uint64_t si = ELF64_R_SYM(ra.r_info);
            rinfo ri = ld_rinfo(type);
            if (ri.kind == RK_BAD)
                return BAD("%s entry %zu: relocation type %u is not "
                           "supported", ld_secname(l, i), r, type);
            if (ri.kind == RK_NONE)
                continue;
            size_t w = ld_width(ri.field);
            if (w > tsize || ra.r_offset > tsize - w)
                return BAD("%s entry %zu: offset %llu outside section %s "
                           "(%llu bytes)", ld_secname(l, i), r,
                           (unsigned long long)ra.r_offset,
                           ld_secname(l, t), (unsigned long long)tsize);
            if (si >= l->nsym)
                return BAD("%s entry %zu: symbol %llu out of range (%zu "
                           "symbols)", ld_secname(l, i), r,
                           (unsigned long long)si, l->nsym);
            if (ri.kind == RK_ABS && ri.field != F_U64)
                l->need_low = 1;   /* absolute 32/16/8-bit addresses */
            if (si == 0)
                continue;   /* STN_UNDEF: S = 0 */
            ld_sym *ls = &l->sym[si];
            if (!ls->used) {
                Elf64_Sym s;
                ld_getsym(l, si, &s);
                if ((rc = ld_check_sym(l, si, &s)))
                    return rc;
                ls->used = 1;
                ls->ext = s.st_shndx == SHN_UNDEF;
            }
            if ((ri.kind == RK_GOTPCREL || ri.kind == RK_GOT) && ls->got < 0)
                ls->got = (int32_t)l->n_got++;
            if ((ri.kind == RK_PLT || ri.kind == RK_PLTOFF) && ls->ext &&
                ls->stub < 0) {
                ls->stub = (int32_t)l->n_stub++;
                if (ls->got < 0)
                    ls->got = (int32_t)l->n_got++;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Layout                                                               */
/* ------------------------------------------------------------------ */

/* *off aligned to `align`, then `size` added; 0, or -1 past the cap. */
static int ld_place(size_t *off, uint64_t align, uint64_t size, size_t *at)
{
    if (align < 1)
        align = 1;
    uint64_t o = (*off + (align - 1)) & ~(uint64_t)(align - 1);
    if (o > OBJ_MAX_REGION || size > OBJ_MAX_REGION - o)
        return -1;
    *at = (size_t)o;
    *off = (size_t)(o + size);
    return 0;
}

static int ld_layout(ld *l)
{
    size_t len[N_PARTS] = {0, 0, 0};
    size_t at;
    /* code, then the stubs */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 1; i < l->nsec; i++) {
            ld_sec *s = &l->sec[i];
            /* writable data: PROGBITS first, then NOBITS (bss) */
            if (s->part < 0 || (pass == 1) != (s->h.sh_type == SHT_NOBITS))
                continue;
            if (ld_place(&len[s->part], s->h.sh_addralign, s->h.sh_size,
                         &s->off))
                return BAD("sections larger than %zu bytes", OBJ_MAX_REGION);
        }
    if (ld_place(&len[PART_TEXT], 8, (uint64_t)l->n_stub * OBJ_STUB_SIZE,
                 &l->stub_off) ||
        ld_place(&len[PART_RODATA], 8, (uint64_t)l->n_got * 8, &l->got_off))
        return BAD("too many external symbols");
    /* common symbols at the end of the writable data */
    for (size_t i = 1; i < l->nsym; i++) {
        if (!l->sym[i].used)
            continue;
        Elf64_Sym s;
        ld_getsym(l, i, &s);
        if (s.st_shndx != SHN_COMMON)
            continue;
        if (ld_place(&len[PART_DATA], s.st_value, s.st_size, &at))
            return BAD("common symbols larger than %zu bytes", OBJ_MAX_REGION);
        l->sym[i].addr = at;   /* an offset in the data part for now */
    }
    size_t total = 0;
    for (int p = 0; p < N_PARTS; p++) {
        l->part_off[p] = total;
        size_t pl = (len[p] + l->page - 1) & ~(l->page - 1);
        l->part_len[p] = pl;
        if (pl > OBJ_MAX_REGION - total)
            return BAD("object larger than %zu bytes", OBJ_MAX_REGION);
        total += pl;
    }
    for (size_t i = 1; i < l->nsec; i++)
        if (l->sec[i].part >= 0)
            l->sec[i].off += l->part_off[l->sec[i].part];
    l->stub_off += l->part_off[PART_TEXT];
    l->got_off += l->part_off[PART_RODATA];
    l->size = total ? total : l->page;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Resolution and relocation                                            */
/* ------------------------------------------------------------------ */

static const void *ld_import(const ld *l, const char *name, int *found)
{
    *found = 0;
    const kiln_obj_options *o = l->opt;
    if (!o)
        return NULL;
    for (size_t i = 0; i < o->n_imports && o->imports; i++)
        if (o->imports[i].name && strcmp(o->imports[i].name, name) == 0) {
            *found = 1;
            return o->imports[i].addr;
        }
    if (o->allow_dlsym) {
        void *p = dlsym(RTLD_DEFAULT, name);
        if (p) {
            *found = 1;
            return p;
        }
    }
    return NULL;
}

/* S of every symbol a relocation uses. */
static int ld_resolve(ld *l)
{
    uint64_t base = (uint64_t)(uintptr_t)l->mem;
    for (size_t i = 1; i < l->nsym; i++) {
        ld_sym *ls = &l->sym[i];
        if (!ls->used)
            continue;
        Elf64_Sym s;
        ld_getsym(l, i, &s);
        switch (s.st_shndx) {
        case SHN_ABS:
            ls->addr = s.st_value;
            break;
        case SHN_COMMON:
            ls->addr = base + l->part_off[PART_DATA] + ls->addr;
            break;
        case SHN_UNDEF: {
            const char *name = ld_str(l, l->strtab, s.st_name);
            if (!name || !*name)
                return BAD("undefined symbol %zu without a valid name", i);
            if (strcmp(name, OBJ_GOT_NAME) == 0) {
                ls->addr = base + l->got_off;
                ls->ext = 0;    /* defined by the loader, no stub */
                break;
            }
            int found;
            const void *p = ld_import(l, name, &found);
            if (!found && ELF64_ST_BIND(s.st_info) != STB_WEAK)
                return BAD("undefined symbol '%s'%s", name,
                           l->opt && l->opt->allow_dlsym
                               ? "" : " (not in the import table)");
            ls->addr = (uint64_t)(uintptr_t)p;
            break;
        }
        default:
            ls->addr = base + l->sec[s.st_shndx].off + s.st_value;
            break;
        }
        ls->resolved = 1;
    }
    /* the GOT and the stubs */
    for (size_t i = 1; i < l->nsym; i++) {
        const ld_sym *ls = &l->sym[i];
        if (ls->got >= 0)
            memcpy(l->mem + l->got_off + (size_t)ls->got * 8, &ls->addr, 8);
        if (ls->stub >= 0) {
            unsigned char *st = l->mem + l->stub_off +
                                (size_t)ls->stub * OBJ_STUB_SIZE;
            int64_t d = (int64_t)(l->got_off + (size_t)ls->got * 8) -
                        (int64_t)(l->stub_off +
                                  (size_t)ls->stub * OBJ_STUB_SIZE + 6);
            int32_t d32 = (int32_t)d;  /* in range: one region < 1 GiB */
            st[0] = 0xff;              /* jmp *disp32(%rip) */
            st[1] = 0x25;
            memcpy(st + 2, &d32, 4);
            st[6] = 0xcc;              /* int3 padding */
            st[7] = 0xcc;
        }
    }
    return 0;
}

static int ld_fits(int field, uint64_t v)
{
    int64_t s = (int64_t)v;
    switch (field) {
    case F_U64: return 1;
    case F_S32: return s >= INT32_MIN && s <= INT32_MAX;
    case F_U32: return v <= UINT32_MAX;
    case F_B16: return s >= INT16_MIN && s <= (int64_t)UINT16_MAX;
    case F_S16: return s >= INT16_MIN && s <= INT16_MAX;
    case F_B8: return s >= INT8_MIN && s <= (int64_t)UINT8_MAX;
    default: return s >= INT8_MIN && s <= INT8_MAX;
    }
}

static int ld_apply(ld *l)
{
    uint64_t base = (uint64_t)(uintptr_t)l->mem;
    uint64_t got = base + l->got_off;
    for (size_t i = 1; i < l->nsec; i++) {
        if (l->sec[i].h.sh_type != SHT_RELA)
            continue;
        size_t t;
        int rc = ld_rela_target(l, i, &t);
        if (rc)
            return rc;
        if (!t)
            continue;
        const Elf64_Shdr *h = &l->sec[i].h;
        size_t n = (size_t)(h->sh_size / sizeof(Elf64_Rela));
        for (size_t r = 0; r < n; r++) {
            Elf64_Rela ra;
            memcpy(&ra, l->img + h->sh_offset + r * sizeof ra, sizeof ra);
            uint32_t type = (uint32_t)ELF64_R_TYPE(ra.r_info);
            size_t si = (size_t)ELF64_R_SYM(ra.r_info);
            rinfo ri = ld_rinfo(type);  /* checked by ld_scan_relocs */
            if (ri.kind == RK_NONE)
                continue;
            const ld_sym *ls = si ? &l->sym[si] : NULL;
            uint64_t S = ls ? ls->addr : 0;
            uint64_t A = (uint64_t)ra.r_addend;
            uint64_t P = base + l->sec[t].off + ra.r_offset;
            uint64_t G = ls && ls->got >= 0 ? (uint64_t)ls->got * 8 : 0;
            uint64_t L = ls && ls->stub >= 0
                             ? base + l->stub_off +
                                   (uint64_t)ls->stub * OBJ_STUB_SIZE
                             : S;
            uint64_t v;
            switch (ri.kind) {
            case RK_ABS: v = S + A; break;
            case RK_PC: v = S + A - P; break;
            case RK_PLT: v = L + A - P; break;
            case RK_GOTPCREL: v = G + got + A - P; break;
            case RK_GOT: v = G + A; break;
            case RK_GOTOFF: v = S + A - got; break;
            case RK_GOTPC: v = got + A - P; break;
            case RK_PLTOFF: v = L - got + A; break;
            default: {      /* RK_SIZE */
                Elf64_Sym s = {0};
                if (si)
                    ld_getsym(l, si, &s);
                v = s.st_size + A;
                break;
            }
            }
            if (!ld_fits(ri.field, v)) {
                const char *nm = "";
                if (si) {
                    Elf64_Sym s;
                    ld_getsym(l, si, &s);
                    nm = ld_str(l, l->strtab, s.st_name);
                    if (!nm || !*nm)
                        nm = ELF64_ST_TYPE(s.st_info) == STT_SECTION &&
                                     s.st_shndx < l->nsec
                                 ? ld_secname(l, s.st_shndx) : "?";
                }
                return BAD("relocation R_X86_64_%s against '%s' at %s+%#llx "
                           "out of range (value %#llx)%s", ri.name, nm,
                           ld_secname(l, t),
                           (unsigned long long)ra.r_offset,
                           (unsigned long long)v,
                           ls && ls->ext ? "; compile with -fPIC" : "");
            }
            unsigned char *at = l->mem + l->sec[t].off + ra.r_offset;
            size_t w = ld_width(ri.field);
            uint64_t le = v;   /* x86-64 is little-endian: low bytes first */
            memcpy(at, &le, w);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Exports                                                              */
/* ------------------------------------------------------------------ */

static int ld_exports(ld *l, kiln_obj *o)
{
    uint64_t base = (uint64_t)(uintptr_t)l->mem;
    size_t n = 0, bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 1; i < l->nsym; i++) {
            Elf64_Sym s;
            ld_getsym(l, i, &s);
            unsigned bind = ELF64_ST_BIND(s.st_info);
            unsigned type = ELF64_ST_TYPE(s.st_info);
            if ((bind != STB_GLOBAL && bind != STB_WEAK) ||
                s.st_shndx == SHN_UNDEF || type == STT_SECTION ||
                type == STT_FILE)
                continue;
            if (s.st_shndx < l->nsec && l->sec[s.st_shndx].part < 0)
                continue;   /* in a section that is not loaded */
            const char *name = ld_str(l, l->strtab, s.st_name);
            if (!name || !*name)
                return BAD("global symbol %zu without a valid name", i);
            size_t nl = strlen(name) + 1;
            if (pass == 0) {
                int rc = ld_check_sym(l, i, &s);
                if (rc)
                    return rc;
                n++;
                bytes += nl;
                continue;
            }
            uint64_t a;
            if (s.st_shndx == SHN_ABS)
                a = s.st_value;
            else if (s.st_shndx == SHN_COMMON)
                a = l->sym[i].addr;   /* every common symbol is allocated */
            else
                a = base + l->sec[s.st_shndx].off + s.st_value;
            memcpy(o->names + bytes, name, nl);
            o->syms[n].name = o->names + bytes;
            o->syms[n].addr = (void *)(uintptr_t)a;
            n++;
            bytes += nl;
        }
        if (pass == 0) {
            o->syms = calloc(n ? n : 1, sizeof *o->syms);
            o->names = malloc(bytes ? bytes : 1);
            if (!o->syms || !o->names)
                return ld_fail(l, KILN_ERR_NOMEM, "out of memory");
            n = bytes = 0;
        }
    }
    o->n_syms = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The API                                                              */
/* ------------------------------------------------------------------ */

static int ld_run(ld *l, kiln_obj *o)
{
    int rc;
    if ((rc = ld_header(l)) || (rc = ld_sections(l)) ||
        (rc = ld_scan_relocs(l)))
        return rc;
    /* common symbols referenced only by name (exports) are allocated too */
    for (size_t i = 1; i < l->nsym; i++) {
        Elf64_Sym s;
        ld_getsym(l, i, &s);
        if (s.st_shndx == SHN_COMMON && !l->sym[i].used) {
            if ((rc = ld_check_sym(l, i, &s)))
                return rc;
            l->sym[i].used = 1;
        }
    }
    if ((rc = ld_layout(l)))
        return rc;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_32BIT
    if (l->need_low)
        flags |= MAP_32BIT;
#endif
    void *m = mmap(NULL, l->size, PROT_READ | PROT_WRITE, flags, -1, 0);
    char eb[128];
    if (m == MAP_FAILED)
        return ld_fail(l, KILN_ERR_NOMEM, "mmap of %zu bytes%s: %s", l->size,
                       l->need_low ? " below 2 GiB" : "",
                       ld_strerror(errno, eb, sizeof eb));
    l->mem = m;
    for (size_t i = 1; i < l->nsec; i++) {
        const ld_sec *s = &l->sec[i];
        if (s->part >= 0 && s->h.sh_type == SHT_PROGBITS && s->h.sh_size)
            memcpy(l->mem + s->off, l->img + s->h.sh_offset,
                   (size_t)s->h.sh_size);
    }
    if ((rc = ld_resolve(l)) || (rc = ld_apply(l)) ||
        (rc = ld_exports(l, o)))
        return rc;
    if (l->part_len[PART_TEXT] &&
        mprotect(l->mem + l->part_off[PART_TEXT], l->part_len[PART_TEXT],
                 PROT_READ | PROT_EXEC) != 0)
        return BAD("mprotect(read + execute): %s",
                   ld_strerror(errno, eb, sizeof eb));
    if (l->part_len[PART_RODATA] &&
        mprotect(l->mem + l->part_off[PART_RODATA], l->part_len[PART_RODATA],
                 PROT_READ) != 0)
        return BAD("mprotect(read): %s", ld_strerror(errno, eb, sizeof eb));
    return 0;
}

int kiln_obj_load(const void *image, size_t len,
                  const kiln_obj_options *opt, kiln_obj **out, char *errbuf,
                  size_t errbuf_size)
{
    ld l;
    memset(&l, 0, sizeof l);
    l.img = image;
    l.len = len;
    l.err = errbuf;
    l.errsz = errbuf_size;
    l.opt = opt;
    if (errbuf && errbuf_size)
        errbuf[0] = 0;
    if (out)
        *out = NULL;
    if (!image || !out)
        return ld_fail(&l, KILN_ERR_ARG, "no image or no out");
    long pg = sysconf(_SC_PAGESIZE);
    l.page = pg > 0 ? (size_t)pg : 4096;
    kiln_obj *o = calloc(1, sizeof *o);
    int rc = o ? ld_run(&l, o) : ld_fail(&l, KILN_ERR_NOMEM, "out of memory");
    free(l.sec);
    free(l.sym);
    if (rc) {
        if (l.mem)
            munmap(l.mem, l.size);
        if (o) {
            free(o->syms);
            free(o->names);
            free(o);
        }
        return rc;
    }
    o->mem = l.mem;
    o->size = l.size;
    *out = o;
    return 0;
}

void *kiln_obj_symbol(const kiln_obj *o, const char *name)
{
    if (!o || !name)
        return NULL;
    for (size_t i = 0; i < o->n_syms; i++)
        if (strcmp(o->syms[i].name, name) == 0)
            return o->syms[i].addr;
    return NULL;
}

size_t kiln_obj_size(const kiln_obj *o)
{
    return o ? o->size : 0;
}

void kiln_obj_free(kiln_obj *o)
{
    if (!o)
        return;
    if (o->mem)
        munmap(o->mem, o->size);
    free(o->syms);
    free(o->names);
    free(o);
}
