// A plain float64 forward pass of a Llama-family model, written for obviousness, not
// speed: the oracle the optimized CPU path is checked against. It reads the same
// model::Model (so the same files and dtypes), widening every weight to double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "model/model.h"

namespace baton::testing {

// Small models of every variant the loaders and forwards take (GQA, MHA tied, MQA, head_dim
// 8, Qwen2 biases, Llama 3 and linear RoPE scaling), which the forwards' tests write with
// the synthetic-model writer and compare with ReferenceForward.
struct ReferenceVariant {
  std::string name;
  model::ModelConfig config;
};

inline model::ModelConfig ReferenceBaseConfig() {
  model::ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 300;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = false;
  return c;
}

inline std::vector<ReferenceVariant> ReferenceVariants() {
  std::vector<ReferenceVariant> v;
  v.push_back({"gqa2_untied", ReferenceBaseConfig()});
  model::ModelConfig mha = ReferenceBaseConfig();
  mha.num_kv_heads = 4;
  mha.tie_word_embeddings = true;
  v.push_back({"mha_tied", mha});
  model::ModelConfig mqa = ReferenceBaseConfig();
  mqa.num_kv_heads = 1;
  v.push_back({"mqa", mqa});
  model::ModelConfig gqa4 = ReferenceBaseConfig();
  gqa4.num_heads = 8;
  gqa4.head_dim = 8;
  gqa4.num_kv_heads = 2;
  v.push_back({"gqa4_headdim8", gqa4});
  model::ModelConfig qwen = ReferenceBaseConfig();
  qwen.architecture = "Qwen2ForCausalLM";
  qwen.attention_bias = true;
  qwen.tie_word_embeddings = true;
  qwen.rope_theta = 1000000;
  v.push_back({"qwen2_bias", qwen});
  model::ModelConfig llama3 = ReferenceBaseConfig();
  llama3.rope_theta = 500000;
  llama3.rope_scaling.type = model::RopeScaling::Type::kLlama3;
  llama3.rope_scaling.factor = 8;
  llama3.rope_scaling.low_freq_factor = 1;
  llama3.rope_scaling.high_freq_factor = 4;
  llama3.rope_scaling.original_max_position = 64;
  v.push_back({"llama3_rope_scaling", llama3});
  model::ModelConfig linear = ReferenceBaseConfig();
  linear.rope_scaling.type = model::RopeScaling::Type::kLinear;
  linear.rope_scaling.factor = 4;
  v.push_back({"linear_rope_scaling", linear});
  return v;
}

using Matrix = std::vector<std::vector<double>>;

inline Matrix Widen(const cpu::MatrixRef& m) {
  Matrix out(m.rows, std::vector<double>(m.cols));
  std::vector<float> row(m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    cpu::DequantizeRow(m, r, row.data());
    for (int64_t c = 0; c < m.cols; ++c) out[r][c] = row[c];
  }
  return out;
}

inline std::vector<double> Apply(const Matrix& w, const std::vector<float>& bias,
                                 const std::vector<double>& x) {
  std::vector<double> y(w.size());
  for (size_t r = 0; r < w.size(); ++r) {
    double s = bias.empty() ? 0.0 : bias[r];
    for (size_t c = 0; c < x.size(); ++c) s += w[r][c] * x[c];
    y[r] = s;
  }
  return y;
}

inline std::vector<double> Norm(const std::vector<double>& x, const std::vector<float>& w,
                                double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// Rotary embedding straight from the definitions: HF's rotate_half pairs (i, i + d/2),
// GGUF llama pairs (2i, 2i + 1); frequencies from rope_theta with the config's scaling.
inline void Rotate(std::vector<double>& v, int64_t heads, int64_t head_dim, int64_t pos,
                   const model::ModelConfig& config, const std::vector<float>& freq_factors) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(config.rope_theta, -2.0 * static_cast<double>(i) / head_dim);
    const auto& s = config.rope_scaling;
    if (!freq_factors.empty()) {
      f /= freq_factors[i];
    } else if (s.type == model::RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == model::RopeScaling::Type::kLlama3) {
      const double wavelen = 2 * std::numbers::pi / f;
      const double low = s.original_max_position / s.low_freq_factor;
      const double high = s.original_max_position / s.high_freq_factor;
      if (wavelen > low) {
        f = f / s.factor;
      } else if (wavelen >= high) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    const double c = std::cos(pos * f), sn = std::sin(pos * f);
    const bool interleaved = config.rope_layout == model::RopeLayout::kInterleaved;
    for (int64_t h = 0; h < heads; ++h) {
      double* x = v.data() + h * head_dim;
      const int64_t a = interleaved ? 2 * i : i;
      const int64_t b = interleaved ? 2 * i + 1 : i + half;
      const double xa = x[a], xb = x[b];
      x[a] = xa * c - xb * sn;
      x[b] = xb * c + xa * sn;
    }
  }
}

// x to the nearest value with 8 significant bits (bfloat16's), ties to even: from the
// definition, not from the engine's bit manipulation. Zero, inf and NaN stay.
inline double RoundToBf16(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);                          // |x| = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, e - 8);  // so x / ulp is in [128, 256)
  return std::nearbyint(x / ulp) * ulp;       // the default rounding: ties to even
}

// How the reference keeps K and V: exactly, or rounded to bf16 as the engine's bf16 pages
// hold them (EngineOptions::kv_cache_dtype).
enum class KvStorage { kExact, kBf16 };

// Logits (vocab doubles) at every position of `tokens`.
inline std::vector<std::vector<double>> ReferenceForward(const model::Model& model,
                                                         const std::vector<int32_t>& tokens,
                                                         KvStorage kv = KvStorage::kExact) {
  const auto& cfg = model.config();
  const auto& w = model.weights();
  const int64_t hd = cfg.head_dim, nh = cfg.num_heads, nkv = cfg.num_kv_heads;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const Matrix embedding = Widen(w.embedding);
  std::vector<std::vector<double>> x(n);
  for (int64_t t = 0; t < n; ++t) x[t] = embedding[tokens[t]];

  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const auto& lw = w.layers[l];
    const Matrix wq = Widen(lw.q.weight), wk = Widen(lw.k.weight), wv = Widen(lw.v.weight),
                 wo = Widen(lw.o.weight), wg = Widen(lw.gate.weight), wu = Widen(lw.up.weight),
                 wd = Widen(lw.down.weight);
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const auto h = Norm(x[t], lw.attn_norm, cfg.rms_norm_eps);
      q[t] = Apply(wq, lw.q.bias, h);
      k[t] = Apply(wk, lw.k.bias, h);
      v[t] = Apply(wv, lw.v.bias, h);
      Rotate(q[t], nh, hd, t, cfg, w.rope_freq_factors);
      Rotate(k[t], nkv, hd, t, cfg, w.rope_freq_factors);
      if (kv == KvStorage::kBf16) {
        for (double& e : k[t]) e = RoundToBf16(e);
        for (double& e : v[t]) e = RoundToBf16(e);
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> attn(nh * hd, 0.0);
      for (int64_t h = 0; h < nh; ++h) {
        const int64_t kvh = h / (nh / nkv);
        std::vector<double> p(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int64_t d = 0; d < hd; ++d) s += q[t][h * hd + d] * k[j][kvh * hd + d];
          p[j] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, p[j]);
        }
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t d = 0; d < hd; ++d) attn[h * hd + d] += p[j] / sum * v[j][kvh * hd + d];
        }
      }
      const auto o = Apply(wo, {}, attn);
      for (size_t i = 0; i < o.size(); ++i) x[t][i] += o[i];
      const auto h2 = Norm(x[t], lw.mlp_norm, cfg.rms_norm_eps);
      const auto g = Apply(wg, {}, h2), u = Apply(wu, {}, h2);
      std::vector<double> a(g.size());
      for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const auto d = Apply(wd, {}, a);
      for (size_t i = 0; i < d.size(); ++i) x[t][i] += d[i];
    }
  }
  const Matrix head = Widen(w.lm_head);
  std::vector<std::vector<double>> logits(n);
  for (int64_t t = 0; t < n; ++t) {
    logits[t] = Apply(head, {}, Norm(x[t], w.final_norm, cfg.rms_norm_eps));
  }
  return logits;
}

}  // namespace baton::testing
