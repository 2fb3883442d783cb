/* A plugin that answers with ABI major 2: the loader must skip it. */
#include <kiln/backend.h>

static int compile(const kiln_kernel *k, const kiln_compile_options *o,
                   kiln_artifact **a, kiln_plugin_error **e)
{
    (void)k; (void)o; (void)a; (void)e;
    return KILN_ERR_BACKEND;
}

static const kiln_backend desc = {
    .struct_size = sizeof(kiln_backend), .abi_major = 2, .abi_minor = 0,
    .name = "badabi", .version = "0", .build_id = "0", .compile = compile,
};

const kiln_backend *kiln_backend_entry(uint32_t major, uint32_t minor,
                                       char *buf, size_t size);
const kiln_backend *kiln_backend_entry(uint32_t major, uint32_t minor,
                                       char *buf, size_t size)
{
    (void)major; (void)minor; (void)buf; (void)size;
    return &desc;
}
