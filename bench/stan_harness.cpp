// bench/stan_harness.cpp -- Stan's own log density + gradient timed in a
// C++ loop, the Stan side of `make bench-stan` (bench/stan.py; issue 27).
//
// Compiled once per posteriordb model by bench/stan.py:
//   g++ -std=c++14 -O3 -march=native -DNDEBUG ... -include MODEL.hpp \
//       bench/stan_harness.cpp
// where MODEL.hpp is stanc's C++ for the model (rstan::stanc(...)$cppcode,
// bench/stan-cpp.R), which defines the type `stan_model`.  No R at run time.
//
// usage: stan_harness DATA.R POINTS [SECONDS]
//   DATA.R   the posterior's data as an R dump (stan::io::dump reads it)
//   POINTS   bench_posteriordb's points file ($KILN_BENCH_PDB_POINTS):
//            "N NPOINTS", then per point x_1..x_N lp g_1..g_N (kiln's)
// Evaluates stan::model::log_prob_grad<true, true> (propto, jacobian) at
// every point and compares Stan's gradient with kiln's:
//   err = max_i |g_stan_i - g_kiln_i| / max(max_i |g_kiln_i|, 1e-300)
// per point, reports the worst.  Then times it exactly as bench_posteriordb
// times kiln: 7 rounds of calls cycling through the points, each round about
// SECONDS/7 long (default 1 s in all), the median round's time per call.
// Prints one line:  dim=N ns_per_grad=T grad_rel_err=E lp_spread=S
// lp_spread = max - min over the points of (lp_stan - lp_kiln): Stan drops
// the constants of `~` statements, so the difference is a constant only.
#include <stan/io/dump.hpp>
#include <stan/model/log_prob_grad.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

static double now_s()
{
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::cerr << "usage: stan_harness DATA.R POINTS [SECONDS]\n";
        return 2;
    }
    double seconds = argc > 3 ? std::atof(argv[3]) : 1.0;
    std::ifstream df(argv[1]);
    if (!df) {
        std::cerr << "stan_harness: cannot read " << argv[1] << "\n";
        return 1;
    }
    std::ifstream pf(argv[2]);
    int n = 0, npts = 0;
    if (!pf || !(pf >> n >> npts) || n <= 0 || npts <= 0) {
        std::cerr << "stan_harness: cannot read points from " << argv[2]
                  << "\n";
        return 1;
    }
    std::vector<std::vector<double>> x(npts, std::vector<double>(n)),
        gk(npts, std::vector<double>(n));
    std::vector<double> lpk(npts);
    for (int p = 0; p < npts; p++) {
        for (int i = 0; i < n; i++)
            pf >> x[p][i];
        pf >> lpk[p];
        for (int i = 0; i < n; i++)
            pf >> gk[p][i];
    }
    if (!pf) {
        std::cerr << "stan_harness: " << argv[2] << " is short\n";
        return 1;
    }
    try {
        stan::io::dump data(df);
        std::stringstream msg;
        stan_model model(data, 0, &msg);
        if ((int)model.num_params_r() != n) {
            std::cerr << "stan_harness: Stan has " << model.num_params_r()
                      << " unconstrained parameters, kiln " << n << "\n";
            return 1;
        }
        std::vector<int> ints;
        std::vector<double> g;
        double worst = 0, dmin = INFINITY, dmax = -INFINITY;
        for (int p = 0; p < npts; p++) {
            double lp = stan::model::log_prob_grad<true, true>(model, x[p],
                                                               ints, g, &msg);
            double num = 0, den = 1e-300;
            for (int i = 0; i < n; i++) {
                num = std::max(num, std::fabs(g[i] - gk[p][i]));
                den = std::max(den, std::fabs(gk[p][i]));
            }
            worst = std::max(worst, num / den);
            dmin = std::min(dmin, lp - lpk[p]);
            dmax = std::max(dmax, lp - lpk[p]);
        }
        // size a round like bench_posteriordb: from a short warm-up
        double t0 = now_s(), sink = 0;
        long calls = 0;
        while (now_s() - t0 < 0.2 || calls < 200) {
            sink += stan::model::log_prob_grad<true, true>(
                model, x[calls % npts], ints, g, &msg);
            calls++;
        }
        double per = (now_s() - t0) / (double)calls;
        long round = (long)(seconds / 7 / (per > 1e-9 ? per : 1e-9));
        if (round < 100)
            round = 100;
        double t[7];
        for (int r = 0; r < 7; r++) {
            double a = now_s();
            for (long i = 0; i < round; i++)
                sink += stan::model::log_prob_grad<true, true>(
                    model, x[i % npts], ints, g, &msg);
            t[r] = (now_s() - a) / (double)round * 1e9;
        }
        std::sort(t, t + 7);
        if (sink == 42.4242)
            std::cerr << "";
        std::printf("dim=%d ns_per_grad=%.1f grad_rel_err=%.3g "
                    "lp_spread=%.3g\n",
                    n, t[3], worst, dmax - dmin);
    } catch (const std::exception &ex) {
        std::cerr << "stan_harness: " << ex.what() << "\n";
        return 1;
    }
    return 0;
}
