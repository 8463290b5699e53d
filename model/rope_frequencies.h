// RoPE inverse frequencies of a model, with its scaling applied, computed one way for
// every format: an HF config with rope_scaling {llama3 | linear}, or a GGUF file whose
// converter baked Llama 3 scaling into `rope_freqs.weight` (per-frequency divisors).
// The synthetic-model writer uses the same Llama 3 divisors, so HF and GGUF copies of a
// model rotate identically.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"

namespace baton::model {

// Llama 3's divisors for each of the head_dim/2 frequencies, exactly as llama.cpp's
// convert_hf_to_gguf.py writes them to rope_freqs.weight: 1 for short wavelengths,
// `factor` for long ones, a smooth blend between. Precondition: scaling.type == kLlama3.
std::vector<float> Llama3RopeFreqFactors(int64_t head_dim, double rope_theta,
                                         const RopeScaling& scaling);

// inv_freq[i] = rope_theta^(-2i/head_dim) / divisor[i] for i < head_dim/2. The divisor is
// freq_factors[i] when given (GGUF rope_freqs, which then must hold head_dim/2 values) or
// the Llama 3 divisors when config.rope_scaling is llama3, times the linear factor when
// it is linear (as llama.cpp combines freq_scale with rope_freqs).
std::vector<double> RopeInverseFrequencies(const ModelConfig& config,
                                           std::span<const float> freq_factors = {});

}  // namespace baton::model
