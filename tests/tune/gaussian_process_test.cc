// The Gaussian process and UCB against closed-form small cases.
#include <cmath>

#include <gtest/gtest.h>

#include "meshtrain/tune/gaussian_process.h"

namespace meshtrain::tune {
namespace {

TEST(GaussianProcess, PriorBeforeAnyObservation) {
  const GaussianProcess gp(GpParams{0.5, 4.0, 0.1});
  const GpPosterior p = gp.predict(Eigen::VectorXd::Zero(2));
  EXPECT_DOUBLE_EQ(p.mean, 0.0);
  EXPECT_DOUBLE_EQ(p.sd, 2.0);
}

// One observation y at x0: mean(x) = k(x) y / (s + n), var(x) = s - k(x)^2 / (s + n).
TEST(GaussianProcess, OnePointClosedForm) {
  const double s = 2.0, n = 0.5, l = 0.7, y = 3.0;
  GaussianProcess gp(GpParams{l, s, n});
  Eigen::MatrixXd X(1, 1);
  X << 0.2;
  gp.fit(X, Eigen::VectorXd::Constant(1, y));
  for (double x : {0.2, 0.5, 1.5}) {
    const double k = s * std::exp(-(x - 0.2) * (x - 0.2) / (2 * l * l));
    const GpPosterior p = gp.predict(Eigen::VectorXd::Constant(1, x));
    EXPECT_NEAR(p.mean, k * y / (s + n), 1e-12) << x;
    EXPECT_NEAR(p.sd, std::sqrt(s - k * k / (s + n)), 1e-12) << x;
  }
  // log N(y; 0, s + n).
  EXPECT_NEAR(gp.log_marginal_likelihood(), -0.5 * y * y / (s + n) - 0.5 * std::log(2 * M_PI * (s + n)), 1e-12);
}

// Two observations: the 2 x 2 system solved by hand.
TEST(GaussianProcess, TwoPointsClosedForm) {
  const double s = 1.0, n = 0.01, l = 1.0;
  GaussianProcess gp(GpParams{l, s, n});
  Eigen::MatrixXd X(2, 2);
  X << 0, 0, 1, 0;
  Eigen::VectorXd y(2);
  y << 1.0, -2.0;
  gp.fit(X, y);
  const double c = s * std::exp(-0.5);  // k between the two points
  const double a = s + n, det = a * a - c * c;
  // (K + nI)^-1 = [a -c; -c a] / det
  const double x = 0.5;  // query (0.5, 1)
  const double k1 = s * std::exp(-(x * x + 1) / 2), k2 = s * std::exp(-((1 - x) * (1 - x) + 1) / 2);
  const double i1 = (a * y(0) - c * y(1)) / det, i2 = (-c * y(0) + a * y(1)) / det;
  const double var = s - (k1 * (a * k1 - c * k2) + k2 * (-c * k1 + a * k2)) / det;
  Eigen::VectorXd q(2);
  q << x, 1;
  const GpPosterior p = gp.predict(q);
  EXPECT_NEAR(p.mean, k1 * i1 + k2 * i2, 1e-12);
  EXPECT_NEAR(p.sd, std::sqrt(var), 1e-12);
  // With little noise the posterior passes (almost) through the data.
  EXPECT_NEAR(gp.predict(X.row(1).transpose()).mean, -2.0, 0.05);
}

TEST(GaussianProcess, UcbIsMeanPlusBetaSd) {
  EXPECT_DOUBLE_EQ(ucb({1.5, 0.25}, 2.0), 2.0);
  EXPECT_DOUBLE_EQ(ucb({-1.0, 3.0}, 0.0), -1.0);
  // UCB prefers the unexplored point when the explored one is mediocre.
  GaussianProcess gp(GpParams{0.3, 1.0, 1e-4});
  Eigen::MatrixXd X(1, 1);
  X << 0.0;
  gp.fit(X, Eigen::VectorXd::Constant(1, 0.5));
  const double near = ucb(gp.predict(Eigen::VectorXd::Constant(1, 0.0)), 2.0);
  const double far = ucb(gp.predict(Eigen::VectorXd::Constant(1, 1.0)), 2.0);
  EXPECT_NEAR(near, 0.52, 1e-3);  // 0.5 / (1 + 1e-4) + 2 x sqrt(1 - 1 / (1 + 1e-4))
  EXPECT_NEAR(far, 2.0, 1e-2);    // almost the prior: 0 + 2 x 1
  EXPECT_GT(far, near);
}

TEST(GaussianProcess, LengthScaleByMarginalLikelihood) {
  // A smooth function is explained best by the longest of the scales offered.
  Eigen::MatrixXd X(5, 1);
  Eigen::VectorXd y(5);
  for (int i = 0; i < 5; ++i) X(i, 0) = i / 4.0, y(i) = X(i, 0);
  const GaussianProcess gp = fit_gp(X, y, GpParams{1.0, 1.0, 1e-3}, {0.05, 1.0});
  EXPECT_DOUBLE_EQ(gp.params().length_scale, 1.0);
}

TEST(GaussianProcess, MismatchedSizesAreAnError) {
  GaussianProcess gp;
  EXPECT_THROW(gp.fit(Eigen::MatrixXd::Zero(2, 1), Eigen::VectorXd::Zero(3)), std::runtime_error);
}

}  // namespace
}  // namespace meshtrain::tune
