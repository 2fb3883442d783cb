/* bench/floor_radon.c — the radon model (examples/radon.kg) log-density
 * and analytic gradient as plain loops: the C floor of make bench-calls.
 * Usage: floor_radon RADON.CSV INPUTS NCALLS
 * INPUTS holds mu_a, log_sigma_a, a_t[85], b, log_sigma_y; prints logp and
 * the five gradients, then us_per_call.  Build: gcc -O3 -march=native -lm */
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

__attribute__((noinline)) static void
logp_grad(double mu, double lsa, const double *at, double b, double lsy)
{
    double sa = exp(lsa), sy = exp(lsy), a[NJ], g[NJ];
    double lp = -0.5 * (mu / 10.0) * (mu / 10.0) - log(10.0) - C
              - 0.5 * (b / 10.0) * (b / 10.0) - log(10.0) - C
              + LOG2 - 0.5 * (sa / 5.0) * (sa / 5.0) - log(5.0) - C + lsa
              + LOG2 - 0.5 * (sy / 5.0) * (sy / 5.0) - log(5.0) - C + lsy;
    for (int j = 0; j < NJ; j++) {
        a[j] = mu + sa * at[j];
        g[j] = 0;
        lp += -0.5 * at[j] * at[j] - C;
    }
    double sr = 0, srf = 0, szz = 0, lik = 0;
    for (int i = 0; i < n; i++) {
        double z = (logr[i] - (a[county[i]] + b * flr[i])) / sy, r = z / sy;
        lik += -0.5 * z * z - lsy - C;
        szz += z * z;
        sr += r;
        srf += r * flr[i];
        g[county[i]] += r;
    }
    double sat = 0;
    for (int j = 0; j < NJ; j++) {
        out_dat[j] = -at[j] + sa * g[j];
        sat += at[j] * g[j];
    }
    out_logp = lp + lik;
    out_dmu = -mu / 100.0 + sr;
    out_db = -b / 100.0 + srf;
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
