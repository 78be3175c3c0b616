// Gaussian-process regression and the upper confidence bound (UCB) that
// picks the next trial (Rasmussen & Williams 2006, algorithm 2.1; Srinivas et
// al. 2010 for UCB). Zero prior mean, squared-exponential kernel
//   k(x, x') = signal_var * exp(-|x - x'|^2 / (2 length_scale^2))
// and Gaussian observation noise `noise_var`. With K the kernel matrix of
// the observed points and L its Cholesky factor (K + noise_var I = L L^T):
//   mean(x) = k(x)^T (K + noise_var I)^-1 y
//   var(x)  = k(x, x) - k(x)^T (K + noise_var I)^-1 k(x)
// The linear algebra is Eigen's (LLT). Callers centre and scale y.
#pragma once

#include <vector>

#include <Eigen/Dense>

namespace meshtrain::tune {

struct GpParams {
  double length_scale = 1.0;
  double signal_var = 1.0;
  double noise_var = 1e-2;
};

struct GpPosterior {
  double mean = 0;
  double sd = 0;
};

class GaussianProcess {
 public:
  explicit GaussianProcess(GpParams p = {}) : p_(p) {}
  // One row of X per observation; y the observed values. Throws Error when
  // the sizes differ or the kernel matrix is not positive definite.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y);
  GpPosterior predict(const Eigen::VectorXd& x) const;  // the prior before fit()
  // log p(y | X) = -y^T a / 2 - sum log L_ii - n log(2 pi) / 2.
  double log_marginal_likelihood() const;
  const GpParams& params() const { return p_; }

 private:
  double kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const;
  GpParams p_;
  Eigen::MatrixXd X_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;  // (K + noise_var I)^-1 y
};

// mean + beta * sd.
double ucb(const GpPosterior& p, double beta);

// The process fitted with the length scale of `length_scales` that gives
// the highest marginal likelihood (the other parameters as in `base`).
GaussianProcess fit_gp(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, GpParams base,
                       const std::vector<double>& length_scales);

}  // namespace meshtrain::tune
