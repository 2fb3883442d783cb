// stan-transforms.cpp — reference values of Stan's constraining transforms
// for tests/python/test_transforms.py: for each transform and a few fixed
// unconstrained vectors, the constrained value (row-major) and the
// log-Jacobian, from StanHeaders 2.21's *_constrain.hpp (rstan's headers
// under /usr/lib/R/site-library).  Output: JSON on stdout, committed as
// tests/data/stan_transforms.json.  Build and run (tools/stan-transforms.sh):
//   g++ -std=c++14 -O0 -I$R/StanHeaders/include -I$R/RcppEigen/include \
//       -I$R/BH/include tools/stan-transforms.cpp && ./a.out
// sum_to_zero is newer than StanHeaders 2.21 (Stan 2.36): not here; the
// test checks it against NumPy.
#include <stan/math/prim/mat/fun/Eigen.hpp>
#include <stan/math/prim/mat/fun/simplex_constrain.hpp>
#include <stan/math/prim/mat/fun/ordered_constrain.hpp>
#include <stan/math/prim/mat/fun/positive_ordered_constrain.hpp>
#include <stan/math/prim/mat/fun/unit_vector_constrain.hpp>
#include <stan/math/prim/mat/fun/cholesky_corr_constrain.hpp>
#include <stan/math/prim/mat/fun/cholesky_factor_constrain.hpp>
#include <stan/math/prim/mat/fun/cov_matrix_constrain.hpp>
#include <stan/math/prim/mat/fun/corr_matrix_constrain.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using Eigen::Dynamic;
using Eigen::Matrix;
typedef Matrix<double, Dynamic, 1> vec;
typedef Matrix<double, Dynamic, Dynamic> mat;

static bool first = true;

static void emit(const char *name, const std::vector<int> &shape,
                 const vec &y, const mat &x, double lp)
{
    std::printf("%s\n  {\"transform\": \"%s\", \"shape\": [", first ? "" : ",",
                name);
    first = false;
    for (size_t i = 0; i < shape.size(); i++)
        std::printf("%s%d", i ? ", " : "", shape[i]);
    std::printf("],\n   \"unc\": [");
    for (int i = 0; i < y.size(); i++)
        std::printf("%s%.17g", i ? ", " : "", y(i));
    std::printf("],\n   \"value\": [");
    int k = 0;
    for (int i = 0; i < x.rows(); i++)      // row-major, as kiln
        for (int j = 0; j < x.cols(); j++)
            std::printf("%s%.17g", k++ ? ", " : "", x(i, j));
    std::printf("],\n   \"log_jacobian\": %.17g}", lp);
}

// A fixed pseudo-random vector of n values in about (-scale, scale).
static vec points(int n, int seed, double scale)
{
    vec y(n);
    unsigned s = 2463534242u + 97u * (unsigned)seed;
    for (int i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        y(i) = scale * (2.0 * (s % 100000) / 100000.0 - 1.0);
    }
    return y;
}

int main()
{
    std::printf("[");
    const double scales[3] = {0.5, 1.5, 4.0};
    for (int seed = 0; seed < 3; seed++) {
        double sc = scales[seed];
        for (int K : {1, 2, 4, 7}) {
            double lp;
            vec y = points(K - 1, seed, sc);
            lp = 0;
            vec x = stan::math::simplex_constrain(y, lp);
            emit("simplex", {K}, y, x, lp);
            y = points(K, seed, sc);
            lp = 0;
            x = stan::math::ordered_constrain(y, lp);
            emit("ordered", {K}, y, x, lp);
            lp = 0;
            x = stan::math::positive_ordered_constrain(y, lp);
            emit("positive_ordered", {K}, y, x, lp);
            lp = 0;
            x = stan::math::unit_vector_constrain(y, lp);
            emit("unit_vector", {K}, y, x, lp);
            y = points(K * (K - 1) / 2, seed, sc);
            lp = 0;
            mat m = stan::math::cholesky_corr_constrain(y, K, lp);
            emit("cholesky_factor_corr", {K, K}, y, m, lp);
            lp = 0;
            if (K > 1) {   // 2.21's read_corr_L reads acc(K - 2)
                m = stan::math::corr_matrix_constrain(y, K, lp);
                emit("corr_matrix", {K, K}, y, m, lp);
            }
            y = points(K * (K + 1) / 2, seed, sc);
            lp = 0;
            m = stan::math::cov_matrix_constrain(y, K, lp);
            emit("cov_matrix", {K, K}, y, m, lp);
            lp = 0;
            m = stan::math::cholesky_factor_constrain(y, K, K, lp);
            emit("cholesky_factor_cov", {K, K}, y, m, lp);
            int M = K + 2;
            y = points(K * (K + 1) / 2 + (M - K) * K, seed, sc);
            lp = 0;
            m = stan::math::cholesky_factor_constrain(y, M, K, lp);
            emit("cholesky_factor_cov", {M, K}, y, m, lp);
        }
    }
    std::printf("\n]\n");
    return 0;
}
