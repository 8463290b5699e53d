#include "model/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

namespace baton::model {
namespace {

double BaseInverseFrequency(int64_t i, int64_t head_dim, double theta) {
  return 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
}

}  // namespace

std::vector<float> Llama3RopeFreqFactors(int64_t head_dim, double rope_theta,
                                         const RopeScaling& s) {
  BATON_CHECK(s.type == RopeScaling::Type::kLlama3);
  const double old_context = static_cast<double>(s.original_max_position);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  std::vector<float> factors;
  factors.reserve(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double wavelen = 2 * std::numbers::pi / BaseInverseFrequency(i, head_dim, rope_theta);
    double divisor;
    if (wavelen < high_freq_wavelen) {
      divisor = 1.0;
    } else if (wavelen > low_freq_wavelen) {
      divisor = s.factor;
    } else {
      const double smooth =
          (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      divisor = 1.0 / ((1 - smooth) / s.factor + smooth);
    }
    factors.push_back(static_cast<float>(divisor));
  }
  return factors;
}

std::vector<double> RopeInverseFrequencies(const ModelConfig& config,
                                           std::span<const float> freq_factors) {
  const int64_t half = config.head_dim / 2;
  std::vector<float> llama3;
  if (freq_factors.empty() && config.rope_scaling.type == RopeScaling::Type::kLlama3) {
    llama3 = Llama3RopeFreqFactors(config.head_dim, config.rope_theta, config.rope_scaling);
    freq_factors = llama3;
  }
  BATON_CHECK(freq_factors.empty() || static_cast<int64_t>(freq_factors.size()) == half);
  const double linear =
      config.rope_scaling.type == RopeScaling::Type::kLinear ? config.rope_scaling.factor : 1.0;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // llama.cpp applies a linear scale and rope_freqs together; so do we.
    const double divisor = linear * (freq_factors.empty() ? 1.0 : freq_factors[i]);
    inv_freq[i] = BaseInverseFrequency(i, config.head_dim, config.rope_theta) / divisor;
  }
  return inv_freq;
}

}  // namespace baton::model
