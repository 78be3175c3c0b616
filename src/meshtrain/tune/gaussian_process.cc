#include "meshtrain/tune/gaussian_process.h"

#include <cmath>
#include <limits>

#include "meshtrain/core/error.h"

namespace meshtrain::tune {

double GaussianProcess::kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const {
  return p_.signal_var * std::exp(-(a - b).squaredNorm() / (2 * p_.length_scale * p_.length_scale));
}

void GaussianProcess::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  check(X.rows() == y.size(), "Gaussian process: {} points but {} values", X.rows(), y.size());
  const Eigen::Index n = X.rows();
  Eigen::MatrixXd K(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) K(i, j) = K(j, i) = kernel(X.row(i).transpose(), X.row(j).transpose());
  K.diagonal().array() += p_.noise_var;
  llt_.compute(K);
  check(llt_.info() == Eigen::Success, "Gaussian process: the kernel matrix is not positive definite");
  X_ = X;
  alpha_ = llt_.solve(y);
}

GpPosterior GaussianProcess::predict(const Eigen::VectorXd& x) const {
  const double prior = p_.signal_var;
  if (X_.rows() == 0) return {0.0, std::sqrt(prior)};
  Eigen::VectorXd k(X_.rows());
  for (Eigen::Index i = 0; i < X_.rows(); ++i) k(i) = kernel(X_.row(i).transpose(), x);
  const Eigen::VectorXd v = llt_.matrixL().solve(k);
  return {k.dot(alpha_), std::sqrt(std::max(0.0, prior - v.squaredNorm()))};
}

double GaussianProcess::log_marginal_likelihood() const {
  const Eigen::Index n = X_.rows();
  if (n == 0) return 0;
  const Eigen::MatrixXd L = llt_.matrixL();
  const Eigen::VectorXd y = L * (L.transpose() * alpha_);
  return -0.5 * y.dot(alpha_) - L.diagonal().array().log().sum() - 0.5 * double(n) * std::log(2 * M_PI);
}

double ucb(const GpPosterior& p, double beta) { return p.mean + beta * p.sd; }

GaussianProcess fit_gp(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, GpParams base,
                       const std::vector<double>& length_scales) {
  GaussianProcess best(base);
  double best_lml = -std::numeric_limits<double>::infinity();
  for (double l : length_scales) {
    GpParams p = base;
    p.length_scale = l;
    GaussianProcess gp(p);
    gp.fit(X, y);
    const double lml = gp.log_marginal_likelihood();
    if (lml > best_lml) {
      best_lml = lml;
      best = gp;
    }
  }
  if (length_scales.empty()) best.fit(X, y);
  return best;
}

}  // namespace meshtrain::tune
