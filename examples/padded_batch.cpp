// A decoder embedding server's pooling step, as SGPT-style models are served: the
// engine hands over its last hidden states as a DLPack tensor [B, S, H] of
// bfloat16, padded on the left as decoders pad, and seqpool pools the
// position-weighted mean straight from that memory: no packing, no copy, and the
// padding (NaN here, so that a read would show) never read. The embeddings stay
// in the model's dtype: the pooler writes bfloat16, pooled and normalised in
// float and rounded once. A plain loop checks every result.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <seqpool/dlpack.hpp>
#include <seqpool/seqpool.hpp>

namespace {

constexpr std::int64_t hidden_size = 256;
constexpr std::int64_t sequence_length = 128;  // S: the longest prompt of the batch, padded to
const std::vector<std::int64_t> prompt_lengths{37, 5, 128, 64};

/// What the model left: prompt b's rows are the last of sequence b.
std::vector<seqpool::bfloat16> model_output() {
  const auto batch = static_cast<std::int64_t>(prompt_lengths.size());
  std::vector<seqpool::bfloat16> hidden(batch * sequence_length * hidden_size, seqpool::bfloat16::from_bits(0x7fc0));
  std::mt19937 random(5);
  std::normal_distribution<float> activation(0.0f, 1.0f);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = sequence_length - prompt_lengths[b]; t < sequence_length; ++t)
      for (std::int64_t c = 0; c < hidden_size; ++c)
        hidden[(b * sequence_length + t) * hidden_size + c] = seqpool::bfloat16(activation(random));
  return hidden;
}

/// SGPT's weighted mean of prompt b, L2-normalised, by a plain loop in double.
std::vector<double> expected(const std::vector<seqpool::bfloat16>& hidden, std::int64_t b) {
  const std::int64_t length = prompt_lengths[b];
  const std::int64_t first = b * sequence_length + sequence_length - length;
  std::vector<double> pooled(hidden_size, 0.0);
  for (std::int64_t t = 0; t < length; ++t)
    for (std::int64_t c = 0; c < hidden_size; ++c) {
      const seqpool::bfloat16 value = hidden[(first + t) * hidden_size + c];
      pooled[c] += static_cast<double>(t + 1) * std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
    }
  double norm = 0;
  for (double& value : pooled) {
    value /= 0.5 * static_cast<double>(length) * static_cast<double>(length + 1);
    norm += value * value;
  }
  for (double& value : pooled) value /= std::max(std::sqrt(norm), 1e-12);
  return pooled;
}

/// A row-major tensor of `shape` in Space's memory, as a framework describes one.
template <class Space, std::size_t Dims>
DLTensor compact_tensor(void* data, std::int64_t (&shape)[Dims], DLDataType dtype) {
  return {.data = data,
          .device = {seqpool::dlpack::memory<Space>::devices[0], 0},
          .ndim = static_cast<std::int32_t>(Dims),
          .dtype = dtype,
          .shape = shape,
          .strides = nullptr,
          .byte_offset = 0};
}

template <class Space>
double serve(const char* label, const std::vector<seqpool::bfloat16>& model) {
  Space space;
  seqpool::buffer<seqpool::bfloat16, Space> states(space, model.size());
  space.copy_in(std::span<const seqpool::bfloat16>(model), states.span());

  // What the engine hands over: its tensor, described, not copied.
  std::int64_t shape[3] = {static_cast<std::int64_t>(prompt_lengths.size()), sequence_length, hidden_size};
  const DLTensor hidden = compact_tensor<Space>(states.data(), shape, {kDLBfloat, 16, 1});

  seqpool::state_store<Space> state(space);
  // Results in bfloat16: the model's dtype, pooled and normalised in float, rounded once.
  using embedder = seqpool::pooler<seqpool::method::weighted_mean, seqpool::head::embed, Space, seqpool::bfloat16>;
  embedder pooler(space, hidden_size);
  seqpool::batch step{.padded = seqpool::padded_rows{.sequence_length = sequence_length,
                                                     .padding = seqpool::padding::left}};
  for (std::size_t b = 0; b < prompt_lengths.size(); ++b)
    step.requests.push_back({.id = "prompt " + std::to_string(b),
                             .task = seqpool::task::embed,
                             .prompt_len = prompt_lengths[b],
                             .num_scheduled = prompt_lengths[b]});
  const auto plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  seqpool::buffer<seqpool::bfloat16, Space> results(space, static_cast<std::size_t>(plan.output_size));
  std::int64_t out_shape[1] = {plan.output_size};
  DLTensor out = compact_tensor<Space>(results.data(), out_shape, {kDLBfloat, 16, 1});

  const seqpool::audit_scope audit(space.audit());
  seqpool::dlpack::visit_hidden<Space>(hidden, step, [&](auto rows) {  // [B, S, H]: the batch's B and S
    pooler.forward(rows, plan, state, seqpool::dlpack::output<Space, seqpool::bfloat16>(out));
  });
  const bool in_contract = seqpool::keeps_sync_contract(audit.counts());

  std::vector<seqpool::bfloat16> stored(results.size());
  space.copy_out(cuda::std::span<const seqpool::bfloat16>(results.data(), results.size()),
                 std::span<seqpool::bfloat16>(stored));
  std::vector<float> host;
  for (const seqpool::bfloat16 value : stored) host.push_back(std::bit_cast<float>(std::uint32_t{value.bits} << 16));
  double largest = 0;
  std::printf("%s:%s\n", label, in_contract ? "" : " SYNC CONTRACT BROKEN");
  for (std::size_t b = 0; b < prompt_lengths.size(); ++b) {
    const seqpool::result_slice& slice = *plan.results[b];
    const std::vector<double> want = expected(model, static_cast<std::int64_t>(b));
    for (std::int64_t c = 0; c < hidden_size; ++c)
      largest = std::max(largest, std::abs(host[slice.offset + c] - want[c]));
    std::printf("  prompt %zu (%3lld tokens, %3lld of padding first): %+.4f %+.4f %+.4f …\n", b,
                static_cast<long long>(prompt_lengths[b]), static_cast<long long>(sequence_length - prompt_lengths[b]),
                host[slice.offset], host[slice.offset + 1], host[slice.offset + 2]);
  }
  std::printf("  largest difference from the plain loop: %.2g\n", largest);
  return in_contract ? largest : INFINITY;
}

}  // namespace

int main() {
  const std::vector<seqpool::bfloat16> model = model_output();
  double largest = serve<seqpool::host_space>("host_space", model);
#if defined(__CUDACC__)
  largest = std::max(largest, serve<seqpool::device_space<seqpool::cuda_backend>>("device_space<cuda_backend>", model));
#else
  largest = std::max(largest, serve<seqpool::device_space<seqpool::omp_backend>>("device_space<omp_backend>", model));
#endif
  // Normalised values lie below 1, where half a bfloat16 step is at most 2^-9.
  return largest < 0x1p-9 + 1e-5 ? 0 : 1;
}
