/* eight_schools.c — the README's C example: evaluate the eight schools
 * model and its gradient through the C API.  Run from the source tree. */
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <stdio.h>

int main(void)
{
    kiln_err err;
    kiln_graph *g = kiln_parse_file("examples/eight_schools.kg", &err);
    kiln_function *f = g ? kiln_compile(g, NULL, &err) : NULL;
    kiln_graph_free(g);                     /* f keeps what it needs */
    if (!f) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    double mu = 0, log_tau = 0, theta_t[8] = {0};
    kiln_tensor in[3] = {{KILN_F64, 0, {0}, &mu}, {KILN_F64, 0, {0}, &log_tau},
                         {KILN_F64, 1, {8}, theta_t}};
    kiln_tensor out[4];                     /* logp and three gradients */
    int rc = kiln_function_call(f, in, out, &err);
    if (rc == 0)
        printf("logp = %.17g, d logp / d mu = %.17g\n",
               *(double *)out[0].data, *(double *)out[1].data);
    else
        fprintf(stderr, "%s\n", err.message);
    kiln_function_free(f);
    return rc != 0;
}
