// What a pooling method is: the extension point users write their own against.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>

namespace seqpool {

enum class method_kind : std::uint8_t {
  sequence,  ///< reduces a request's rows to one vector
  token,     ///< returns chosen rows (and columns) of a request
};

/// Rows of one chunk that a sequence method reads, counted like chunk rows.
struct row_window {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

/// A sequence method is a column-wise reduction: every column starts at
/// identity(), takes each row's value through accumulate(), combines partial
/// results of row tiles (and of earlier chunks) with merge(), and ends with
/// finish(). window() says which rows of a chunk it reads; keeps_state says
/// whether a chunked request carries its running value to the next step. The
/// device calls identity/accumulate/merge/finish, so mark them SEQPOOL_HOST_DEVICE.
template <class Method>
concept sequence_method =
    requires(const Method method, float value, float row_value, std::int64_t prompt_len, const chunk& part) {
      requires Method::kind == method_kind::sequence;
      { Method::keeps_state } -> std::convertible_to<bool>;
      { method.window(part) } -> std::same_as<row_window>;
      { method.identity() } -> std::same_as<float>;
      { method.accumulate(value, row_value) } -> std::same_as<float>;
      { method.merge(value, value) } -> std::same_as<float>;
      { method.finish(value, prompt_len) } -> std::same_as<float>;
    };

/// A token method chooses, on the host, which prompt positions and which columns
/// a finished request returns; the device only gathers them. select() appends the
/// chosen positions in [begin, end) in ascending order and count() says how many
/// there are without listing them (a long prompt's state is sized from it);
/// check() rejects knobs the method cannot serve; reads_token_ids makes the
/// pooler require the prompt's token ids.
template <class Method>
concept token_method =
    requires(const Method method, const request& r, std::size_t index, std::int64_t position,
             std::int64_t hidden_size, std::vector<std::int64_t>& positions) {
      requires Method::kind == method_kind::token;
      { Method::reads_token_ids } -> std::convertible_to<bool>;
      method.check(index, r, hidden_size);
      method.select(r, position, position, positions);
      { method.count(r, position, position) } -> std::same_as<std::int64_t>;
      { method.columns(r) } -> std::same_as<std::span<const std::int64_t>>;
    };

template <class Method>
concept pooling_method = sequence_method<Method> || token_method<Method>;

}  // namespace seqpool
