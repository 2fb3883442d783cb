/* bench/floor_radon.c — the radon model (examples/radon.kg) log-density
 * and analytic gradient as plain loops: the C floor of make bench-calls.
 * Usage: floor_radon RADON.CSV INPUTS NCALLS
 * INPUTS holds mu_a, log_sigma_a, a_t[85], b, log_sigma_y; prints logp and
 * the five gradients, then us_per_call.  Build: gcc -O3 -march=native -lm
 * (bench/calls.sh). */
#include <math.h>
#include <string.h>
#include "floor_common.h"

#define NJ 85
#define NMAX 4096
static long county[NMAX];
static double flr[NMAX], logr[NMAX];
static int n;
static const double C = 0.9189385332046727, LOG2 = 0.6931471805599453;

static double out_logp, out_dmu, out_dlsa, out_dat[NJ], out_db, out_dlsy;

static void read_csv(const char *path)
{
    char line[512];
    FILE *f = fopen(path, "r");
    if (!f || !fgets(line, sizeof line, f)) { fprintf(stderr, "floor_radon: cannot read %s\n", path); exit(1); }
    while (n < NMAX && fgets(line, sizeof line, f)) {
        /* county,county_code,floor,log_radon,uppm */
        char *p = strchr(line, ',');
        if (!p) continue;
        char *e;
        county[n] = strtol(p + 1, &e, 10);
        flr[n] = strtod(e + 1, &e);
        logr[n] = strtod(e + 1, &e);
        if (county[n] < 0 || county[n] >= NJ) { fprintf(stderr, "floor_radon: bad county\n"); exit(1); }
        n++;
    }
    fclose(f);
}

/* One pass over the houses, as fast as it can be written (issue 27): the
 * residual d_i = log_radon_i - a[county_i] - b * floor_i is formed once and
 * feeds every sum; 1/sigma_y^2 is factored out of the sums (one exp, no
 * division per house); the loop is unrolled by U with U private copies of
 * the scatter-add target g[county_i] += d_i and of the scalar sums, so that
 * consecutive houses of one county (the data are sorted by county) do not
 * chain through one memory cell: the store-to-load latency of a single
 * g[] was what made the plain loop 2-3x slower.  gcc -O3 -march=native. */
#define U 4
__attribute__((noipa)) static void
logp_grad(double mu, double lsa, const double *at, double b, double lsy)
{
    double sa = exp(lsa), sy = exp(lsy), iv = exp(-2.0 * lsy), a[NJ], g[U][NJ];
    double lp = -0.5 * (mu / 10.0) * (mu / 10.0) - log(10.0) - C
              - 0.5 * (b / 10.0) * (b / 10.0) - log(10.0) - C
              + LOG2 - 0.5 * (sa / 5.0) * (sa / 5.0) - log(5.0) - C + lsa
              + LOG2 - 0.5 * (sy / 5.0) * (sy / 5.0) - log(5.0) - C + lsy;
    double sq = 0;
    for (int j = 0; j < NJ; j++) {
        a[j] = mu + sa * at[j];
        sq += at[j] * at[j];
    }
    memset(g, 0, sizeof g);
    double sd[U] = {0}, sdf[U] = {0}, sdd[U] = {0};
    int i = 0;
    for (; i + U <= n; i += U)
        for (int k = 0; k < U; k++) {
            long c = county[i + k];
            double d = logr[i + k] - a[c] - b * flr[i + k];
            sdd[k] += d * d;
            sd[k] += d;
            sdf[k] += d * flr[i + k];
            g[k][c] += d;
        }
    for (; i < n; i++) {
        long c = county[i];
        double d = logr[i] - a[c] - b * flr[i];
        sdd[0] += d * d;
        sd[0] += d;
        sdf[0] += d * flr[i];
        g[0][c] += d;
    }
    double Sd = 0, Sdf = 0, Sdd = 0, sat = 0;
    for (int k = 0; k < U; k++) {
        Sd += sd[k];
        Sdf += sdf[k];
        Sdd += sdd[k];
    }
    for (int j = 0; j < NJ; j++) {
        double gj = 0;
        for (int k = 0; k < U; k++)
            gj += g[k][j];
        gj *= iv;                       /* sum of (y - y_hat) / sigma_y^2 */
        out_dat[j] = -at[j] + sa * gj;
        sat += at[j] * gj;
    }
    double szz = Sdd * iv;              /* sum of z^2 */
    out_logp = lp - 0.5 * sq - NJ * C - 0.5 * szz - n * (lsy + C);
    out_dmu = -mu / 100.0 + Sd * iv;
    out_db = -b / 100.0 + Sdf * iv;
    out_dlsa = 1.0 - (sa / 5.0) * (sa / 5.0) + sa * sat;
    out_dlsy = 1.0 - (sy / 5.0) * (sy / 5.0) + szz - n;
}

int main(int argc, char **argv)
{
    double in[NJ + 4];
    if (argc != 4) { fprintf(stderr, "usage: floor_radon RADON.CSV INPUTS NCALLS\n"); return 2; }
    read_csv(argv[1]);
    floor_read_inputs(argv[2], in, NJ + 4);
    long calls = atol(argv[3]);
    const double *at = in + 2;
    double mu = in[0], lsa = in[1], b = in[NJ + 2], lsy = in[NJ + 3];
    logp_grad(mu, lsa, at, b, lsy);
    floor_print("logp", &out_logp, 1);
    floor_print("d_mu_a", &out_dmu, 1);
    floor_print("d_log_sigma_a", &out_dlsa, 1);
    floor_print("d_a_t", out_dat, NJ);
    floor_print("d_b", &out_db, 1);
    floor_print("d_log_sigma_y", &out_dlsy, 1);
    FLOOR_TIME(calls, logp_grad(mu, lsa, at, b, lsy));
    return 0;
}
