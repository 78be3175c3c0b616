// A plain double-precision GPT forward pass, written independently of the
// engine's kernels: the reference that gradient checks difference against.
// Weights are read by parameter name in the serial layout's shapes.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"

namespace meshtrain::testing {

using Weights = std::map<std::string, std::vector<double>>;

// Mean cross-entropy over B x S tokens (padding logits masked out).
inline double reference_loss(const ModelConfig& m, const Weights& W, const std::vector<int>& tokens,
                             const std::vector<int>& targets, int B) {
  const int S = m.seq_length, h = m.hidden_size, H = m.num_attention_heads, hd = h / H, f = m.ffn();
  const int Vp = static_cast<int>(m.padded_vocab()), V = m.vocab_size;
  auto w = [&](const std::string& n) -> const std::vector<double>& { return W.at(n); };
  auto layernorm = [&](const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / h; ++r) {
      double mu = 0, var = 0;
      for (int c = 0; c < h; ++c) mu += x[r * h + c];
      mu /= h;
      for (int c = 0; c < h; ++c) var += (x[r * h + c] - mu) * (x[r * h + c] - mu);
      var /= h;
      const double rs = 1.0 / std::sqrt(var + 1e-5);
      for (int c = 0; c < h; ++c) y[r * h + c] = (x[r * h + c] - mu) * rs * g[c] + b[c];
    }
    return y;
  };
  // y[rows, n] = x[rows, k] . W[n, k]^T + b
  auto linear = [&](const std::vector<double>& x, int k, const std::vector<double>& Wt, const std::vector<double>* b,
                    int n) {
    const size_t rows = x.size() / k;
    std::vector<double> y(rows * n);
    for (size_t r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) {
        double s = b ? (*b)[j] : 0.0;
        for (int i = 0; i < k; ++i) s += x[r * k + i] * Wt[size_t(j) * k + i];
        y[r * n + j] = s;
      }
    return y;
  };
  double total = 0;
  for (int bi = 0; bi < B; ++bi) {
    std::vector<double> x(size_t(S) * h);
    for (int t = 0; t < S; ++t)
      for (int c = 0; c < h; ++c)
        x[t * h + c] = w("embedding.word")[size_t(tokens[bi * S + t]) * h + c] + w("embedding.position")[t * h + c];
    for (int l = 0; l < m.num_layers; ++l) {
      const std::string n = "layers." + std::to_string(l) + ".";
      const auto a = layernorm(x, w(n + "ln1.weight"), w(n + "ln1.bias"));
      const auto qkv = linear(a, h, w(n + "qkv.weight"), &w(n + "qkv.bias"), 3 * h);  // [S, H, 3, hd]
      std::vector<double> att(size_t(S) * h, 0.0);
      for (int hh = 0; hh < H; ++hh)
        for (int t = 0; t < S; ++t) {
          std::vector<double> p(t + 1);
          double mx = -1e300;
          for (int u = 0; u <= t; ++u) {
            double s = 0;
            for (int d = 0; d < hd; ++d) s += qkv[t * 3 * h + hh * 3 * hd + d] * qkv[u * 3 * h + hh * 3 * hd + hd + d];
            p[u] = s / std::sqrt(double(hd));
            mx = std::max(mx, p[u]);
          }
          double z = 0;
          for (auto& v : p) z += (v = std::exp(v - mx));
          for (int u = 0; u <= t; ++u)
            for (int d = 0; d < hd; ++d) att[t * h + hh * hd + d] += p[u] / z * qkv[u * 3 * h + hh * 3 * hd + 2 * hd + d];
        }
      const auto pr = linear(att, h, w(n + "proj.weight"), &w(n + "proj.bias"), h);
      for (size_t i = 0; i < x.size(); ++i) x[i] += pr[i];
      const auto a2 = layernorm(x, w(n + "ln2.weight"), w(n + "ln2.bias"));
      auto u = linear(a2, h, w(n + "fc.weight"), &w(n + "fc.bias"), f);
      for (auto& v : u) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      const auto o = linear(u, f, w(n + "fc2.weight"), &w(n + "fc2.bias"), h);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    }
    const auto y = layernorm(x, w("head.lnf.weight"), w("head.lnf.bias"));
    const auto logits = linear(y, h, w("embedding.word"), nullptr, Vp);
    for (int t = 0; t < S; ++t) {
      double mx = -1e300, z = 0;
      for (int v = 0; v < V; ++v) mx = std::max(mx, logits[size_t(t) * Vp + v]);
      for (int v = 0; v < V; ++v) z += std::exp(logits[size_t(t) * Vp + v] - mx);
      total += std::log(z) + mx - logits[size_t(t) * Vp + targets[bi * S + t]];
    }
  }
  return total / (double(B) * S);
}

}  // namespace meshtrain::testing
