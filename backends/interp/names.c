/*
 * names.c — names and small tables (dtypes, kinds, the opcode table with
 * each opcode's arity and dtype class) and the plugin's error objects and
 * messages.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

static const char *kiln_interp_dtype_name(unsigned dt)
{
    static const char *const names[KILN_NDTYPES] = {
        "f64", "f32", "i64", "i32", "bool"
    };
    return dt < KILN_NDTYPES ? names[dt] : "?";
}

static size_t kiln_interp_dtype_size(unsigned dt)
{
    static const size_t sizes[KILN_NDTYPES] = { 8, 4, 8, 4, 1 };
    return dt < KILN_NDTYPES ? sizes[dt] : 0;
}

static int kiln_interp_is_float(unsigned dt)
{
    return dt == KILN_F64 || dt == KILN_F32;
}

static int kiln_interp_is_int(unsigned dt)
{
    return dt == KILN_I64 || dt == KILN_I32;
}

static const char *kiln_interp_kind_name(uint32_t kind)
{
    switch (kind) {
    case KILN_KERNEL_ELEMWISE: return "elemwise";
    case KILN_KERNEL_REDUCE: return "reduce";
    case KILN_KERNEL_JOIN: return "join";
    case KILN_KERNEL_GATHER: return "gather";
    case KILN_KERNEL_SCATTER: return "scatter";
    case KILN_KERNEL_DOT: return "dot";
    case KILN_KERNEL_LOOP: return "loop";
    case KILN_KERNEL_SCAN: return "scan";
    case KILN_KERNEL_LINALG: return "linalg";
    case KILN_KERNEL_RECUR: return "recur";
    case KILN_KERNEL_ODE: return "ode";
    case KILN_KERNEL_TOPK: return "topk";
    default: return "?";
    }
}

/* Which dtypes an opcode accepts (see kiln_interp_check_instr). */
enum kiln_interp_opclass {
    KILN_INTERP_C_LOAD,    /* dtype of the input view */
    KILN_INTERP_C_CONST,   /* any dtype */
    KILN_INTERP_C_CAST,    /* any dtype to any dtype */
    KILN_INTERP_C_NUMERIC, /* f64 f32 i64 i32; operands of the result dtype */
    KILN_INTERP_C_FLOAT,   /* f64 f32; operands of the result dtype */
    KILN_INTERP_C_ORDER,   /* maximum/minimum: any dtype, bool included */
    KILN_INTERP_C_WHERE,   /* bool ? T : T -> T */
    KILN_INTERP_C_COMPARE, /* T, T -> bool */
    KILN_INTERP_C_LOGIC,   /* bool, bool -> bool */
    KILN_INTERP_C_TAKE,    /* table input a at index b (LOOP only) */
    KILN_INTERP_C_PARAM    /* f64 f32: element a of the call's constant block */
};

typedef struct kiln_interp_opinfo {
    const char *name;
    uint8_t arity;    /* operands among a, b, c read as instructions */
    uint8_t cls;      /* kiln_interp_opclass */
    uint8_t runtime;  /* 1 when it calls a kiln_runtime function */
} kiln_interp_opinfo;

static const kiln_interp_opinfo kiln_interp_ops[KILN_I_COUNT] = {
    [KILN_I_LOAD] = { "load", 0, KILN_INTERP_C_LOAD, 0 },
    [KILN_I_CONST] = { "const", 0, KILN_INTERP_C_CONST, 0 },
    [KILN_I_CAST] = { "cast", 1, KILN_INTERP_C_CAST, 0 },
    [KILN_I_ADD] = { "add", 2, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_SUB] = { "sub", 2, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_MUL] = { "mul", 2, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_TRUE_DIV] = { "true_div", 2, KILN_INTERP_C_FLOAT, 0 },
    [KILN_I_NEG] = { "neg", 1, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_ABS] = { "abs", 1, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_EXP] = { "exp", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_EXPM1] = { "expm1", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_LOG] = { "log", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_LOG1P] = { "log1p", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_SQRT] = { "sqrt", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_SQUARE] = { "square", 1, KILN_INTERP_C_NUMERIC, 0 },
    [KILN_I_POW] = { "pow", 2, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_SIGMOID] = { "sigmoid", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_SOFTPLUS] = { "softplus", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_TANH] = { "tanh", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_SIN] = { "sin", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_COS] = { "cos", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ERF] = { "erf", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ERFC] = { "erfc", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_GAMMALN] = { "gammaln", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_DIGAMMA] = { "digamma", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_MAXIMUM] = { "maximum", 2, KILN_INTERP_C_ORDER, 0 },
    [KILN_I_MINIMUM] = { "minimum", 2, KILN_INTERP_C_ORDER, 0 },
    [KILN_I_WHERE] = { "where", 3, KILN_INTERP_C_WHERE, 0 },
    [KILN_I_EQ] = { "eq", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_NE] = { "ne", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_LT] = { "lt", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_LE] = { "le", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_GT] = { "gt", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_GE] = { "ge", 2, KILN_INTERP_C_COMPARE, 0 },
    [KILN_I_AND] = { "and", 2, KILN_INTERP_C_LOGIC, 0 },
    [KILN_I_OR] = { "or", 2, KILN_INTERP_C_LOGIC, 0 },
    [KILN_I_NOT] = { "not", 1, KILN_INTERP_C_LOGIC, 0 },
    [KILN_I_TRIGAMMA] = { "trigamma", 1, KILN_INTERP_C_FLOAT, 1 },
    /* arity 1: its one instruction operand is b (a names an input) */
    [KILN_I_TAKE] = { "take", 1, KILN_INTERP_C_TAKE, 0 },
    /* ABI 1.7: runtime table version 3 */
    [KILN_I_FLOOR] = { "floor", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_CEIL] = { "ceil", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_TRUNC] = { "trunc", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_RINT] = { "rint", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ROUND] = { "round", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_LOG1MEXP] = { "log1mexp", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ERFCX] = { "erfcx", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ERFINV] = { "erfinv", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_ERFCINV] = { "erfcinv", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_MOD] = { "mod", 2, KILN_INTERP_C_NUMERIC, 1 },
    [KILN_I_GAMMAINC] = { "gammainc", 2, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_GAMMAINCC] = { "gammaincc", 2, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_BETAINC] = { "betainc", 3, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_GAMMAINC_DA] = { "gammainc_da", 2, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_BETAINC_DA] = { "betainc_da", 3, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_BETAINC_DB] = { "betainc_db", 3, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_PARAM] = { "param", 0, KILN_INTERP_C_PARAM, 0 },
    [KILN_I_I0E] = { "i0e", 1, KILN_INTERP_C_FLOAT, 1 },
    [KILN_I_I1E] = { "i1e", 1, KILN_INTERP_C_FLOAT, 1 },
};

/* The operands of an instruction that name earlier instructions (TAKE's
 * only one is b). */
static int32_t kiln_interp_operand(const kiln_instr *in, unsigned q)
{
    if (in->op == KILN_I_TAKE)
        return in->b;
    return q == 0 ? in->a : q == 1 ? in->b : in->c;
}

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

/* Returned when even the error object cannot be allocated; error_free
 * recognises it and leaves it alone. */
static char kiln_interp_nomem_message[] = "interp: out of memory";
static kiln_plugin_error kiln_interp_nomem = {
    sizeof(kiln_plugin_error), KILN_ERR_NOMEM, kiln_interp_nomem_message
};

static kiln_plugin_error *kiln_interp_error_new(int code, const char *fmt,
                                                ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0)
        len = 0;
    kiln_plugin_error *e = malloc(sizeof *e);
    char *msg = malloc((size_t)len + 1);
    if (!e || !msg) {
        free(e);
        free(msg);
        return &kiln_interp_nomem;
    }
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)len + 1, fmt, ap);
    va_end(ap);
    e->struct_size = sizeof *e;
    e->code = code;
    e->message = msg;
    return e;
}

static void kiln_interp_error_free(kiln_plugin_error *e)
{
    if (!e || e == &kiln_interp_nomem)
        return;
    free(e->message);
    free(e);
}

/* Store an error in *err when the caller asked for one. */
static int kiln_interp_report(kiln_plugin_error **err, int code,
                              const char *msg)
{
    if (err)
        *err = kiln_interp_error_new(code, "interp: %s", msg);
    return code;
}

/* Format the reason a kernel is refused; returns -1 for the caller. */
static int kiln_interp_why(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* "(3, 4)" for messages; "()" for rank 0. */
static const char *kiln_interp_shape_str(char *buf, size_t n, int rank,
                                         const int64_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < rank && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld",
                                 d ? ", " : "", (long long)shape[d]);
    if (used < n)
        snprintf(buf + used, n - used, ")");
    return buf;
}
