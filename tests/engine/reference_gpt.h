// A plain double-precision GPT / Llama forward pass, written independently of the
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

// Mean cross-entropy over B x S tokens (padding logits masked out). Follows
// the model's choices: LayerNorm or RMSNorm, GELU or SwiGLU (gate "fc", up
// "fc.up"), learned or rotary (rotate-half) or no positions, grouped-query
// attention (qkv rows per group: its queries, k, v), biases where the
// weights have them, tied or untied ("head.output") output.
inline double reference_loss(const ModelConfig& m, const Weights& W, const std::vector<int>& tokens,
                             const std::vector<int>& targets, int B) {
  const int S = m.seq_length, h = m.hidden_size, H = m.num_attention_heads, hd = h / H, f = m.ffn();
  const int G = m.kv_heads(), R = H / G, q = (H + 2 * G) * hd;
  const int Vp = static_cast<int>(m.padded_vocab()), V = m.vocab_size;
  auto w = [&](const std::string& n) -> const std::vector<double>& { return W.at(n); };
  auto opt = [&](const std::string& n) -> const std::vector<double>* {
    auto it = W.find(n);
    return it == W.end() ? nullptr : &it->second;
  };
  auto norm = [&](const std::vector<double>& x, const std::string& prefix) {
    const std::vector<double>& g = w(prefix + "weight");
    const std::vector<double>* b = opt(prefix + "bias");
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / h; ++r) {
      double mu = 0, var = 0;
      if (!m.rmsnorm) {
        for (int c = 0; c < h; ++c) mu += x[r * h + c];
        mu /= h;
      }
      for (int c = 0; c < h; ++c) var += (x[r * h + c] - mu) * (x[r * h + c] - mu);
      var /= h;
      const double rs = 1.0 / std::sqrt(var + m.norm_epsilon);
      for (int c = 0; c < h; ++c) y[r * h + c] = (x[r * h + c] - mu) * rs * g[c] + (b ? (*b)[c] : 0.0);
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
  // Rotary frequencies, rescaled as Meta's llama-models apply_scaling
  // (llama3) or by position interpolation (linear).
  std::vector<double> freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) {
    const double f = std::pow(m.rotary_base, -2.0 * i / hd), wavelen = 2 * M_PI / f;
    const RopeScaling& rs = m.rope_scaling;
    const double L = rs.original_max_position_embeddings;
    freq[i] = f;
    if (rs.type == RopeScaling::Type::linear) freq[i] = f / rs.factor;
    if (rs.type != RopeScaling::Type::llama3 || wavelen < L / rs.high_freq_factor) continue;
    if (wavelen > L / rs.low_freq_factor) {
      freq[i] = f / rs.factor;
    } else {
      const double smooth = (L / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      freq[i] = (1 - smooth) * f / rs.factor + smooth * f;
    }
  }
  // Rotary embedding of one head vector at position t (rotate-half form).
  auto rotate = [&](double* v, int t) {
    for (int i = 0; i < hd / 2; ++i) {
      const double th = t * freq[i], a = v[i], b = v[i + hd / 2];
      v[i] = a * std::cos(th) - b * std::sin(th);
      v[i + hd / 2] = b * std::cos(th) + a * std::sin(th);
    }
  };
  double total = 0;
  for (int bi = 0; bi < B; ++bi) {
    std::vector<double> x(size_t(S) * h);
    for (int t = 0; t < S; ++t)
      for (int c = 0; c < h; ++c)
        x[t * h + c] = w("embedding.word")[size_t(tokens[bi * S + t]) * h + c] +
                       (m.learned_positions ? w("embedding.position")[t * h + c] : 0.0);
    for (int l = 0; l < m.num_layers; ++l) {
      const std::string n = "layers." + std::to_string(l) + ".";
      const auto a = norm(x, n + "ln1.");
      auto qkv = linear(a, h, w(n + "qkv.weight"), opt(n + "qkv.bias"), q);  // [S, G, R + 2, hd]
      auto qof = [&](int hh) { return (hh / R) * (R + 2) * hd + (hh % R) * hd; };
      auto kof = [&](int hh) { return (hh / R) * (R + 2) * hd + R * hd; };
      if (m.rotary)
        for (int t = 0; t < S; ++t)
          for (int g = 0; g < G; ++g)
            for (int v = 0; v <= R; ++v) rotate(&qkv[size_t(t) * q + (g * (R + 2) + v) * hd], t);
      std::vector<double> att(size_t(S) * h, 0.0);
      for (int hh = 0; hh < H; ++hh)
        for (int t = 0; t < S; ++t) {
          std::vector<double> p(t + 1);
          double mx = -1e300;
          for (int u = 0; u <= t; ++u) {
            double s = 0;
            for (int d = 0; d < hd; ++d) s += qkv[t * q + qof(hh) + d] * qkv[u * q + kof(hh) + d];
            p[u] = s / std::sqrt(double(hd));
            mx = std::max(mx, p[u]);
          }
          double z = 0;
          for (auto& v : p) z += (v = std::exp(v - mx));
          for (int u = 0; u <= t; ++u)
            for (int d = 0; d < hd; ++d) att[t * h + hh * hd + d] += p[u] / z * qkv[u * q + kof(hh) + hd + d];
        }
      const auto pr = linear(att, h, w(n + "proj.weight"), opt(n + "proj.bias"), h);
      for (size_t i = 0; i < x.size(); ++i) x[i] += pr[i];
      const auto a2 = norm(x, n + "ln2.");
      auto u = linear(a2, h, w(n + "fc.weight"), opt(n + "fc.bias"), f);
      if (m.gated_mlp) {
        const auto up = linear(a2, h, w(n + "fc.up.weight"), opt(n + "fc.up.bias"), f);
        for (size_t i = 0; i < u.size(); ++i) u[i] = u[i] / (1 + std::exp(-u[i])) * up[i];
      } else {
        for (auto& v : u) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      const auto o = linear(u, f, w(n + "fc2.weight"), opt(n + "fc2.bias"), h);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    }
    const auto y = norm(x, "head.lnf.");
    const auto logits = linear(y, h, w(m.tied_embeddings ? "embedding.word" : "head.output"), nullptr, Vp);
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
