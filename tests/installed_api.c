/*
 * installed_api.c — built by `make installcheck` against the *installed*
 * headers and library through pkg-config, to show that a program outside
 * the tree can use kiln: builds a graph with the C API, compiles it with
 * the installed interp plugin, and checks one value.
 */
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <stdio.h>

int main(void)
{
    kiln_err err;
    kiln_graph *g = kiln_graph_new("installed", &err);
    int64_t three = 3;
    kiln_value x = g ? kiln_graph_input(g, "x", KILN_F64, 1, &three, &err) : -1;
    kiln_value e = x >= 0 ? kiln_graph_op(g, "exp", 1, &x, NULL, 0, &err) : -1;
    kiln_value s = e >= 0 ? kiln_graph_op(g, "sum", 1, &e, NULL, 0, &err) : -1;
    if (s < 0 || kiln_graph_output(g, "s", s, &err)) {
        fprintf(stderr, "build: %s\n", err.message);
        return 1;
    }
    kiln_function *f = kiln_compile(g, NULL, &err);
    kiln_graph_free(g);
    if (!f) {
        fprintf(stderr, "compile: %s\n", err.message);
        return 1;
    }
    double xv[3] = {0, 0, 0};
    kiln_tensor in[1] = {{KILN_F64, 1, {3}, xv}};
    kiln_tensor out[1];
    int rc = kiln_function_call(f, in, out, &err);
    double v = rc ? 0 : *(double *)out[0].data;
    printf("sum(exp(0, 0, 0)) = %g with backend %s\n", v,
           kiln_function_kernel_backend(f, 0));
    kiln_function_free(f);
    return rc || v != 3.0;
}
