/* A plugin whose entry point refuses to start. */
#include <kiln/backend.h>
#include <stdio.h>

const kiln_backend *kiln_backend_entry(uint32_t major, uint32_t minor,
                                       char *buf, size_t size);
const kiln_backend *kiln_backend_entry(uint32_t major, uint32_t minor,
                                       char *buf, size_t size)
{
    (void)major; (void)minor;
    snprintf(buf, size, "failinit: no device found");
    return NULL;
}
