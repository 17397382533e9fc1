// A concat whose modes are chosen at run time: sentence-transformers' Pooling
// read from a configuration (its pooling_mode_* flags), by name ("cls+max+mean").
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include <seqpool/method/concat.hpp>
#include <seqpool/method/last.hpp>
#include <seqpool/method/max.hpp>
#include <seqpool/method/mean.hpp>
#include <seqpool/method/mean_sqrt_len.hpp>
#include <seqpool/method/weighted_mean.hpp>

namespace seqpool::method {

namespace detail_concat {

/// The built-in sequence methods a runtime_concat joins, in the order
/// sentence-transformers' Pooling concatenates its modes: a mode's place here
/// is its code, and bit `code` of a runtime_concat's set.
inline constexpr std::array<std::string_view, 6> mode_order{cls::name,           max::name,           mean::name,
                                                            mean_sqrt_len::name, weighted_mean::name, last::name};
inline constexpr int mode_codes = static_cast<int>(mode_order.size());

/// A mode of a runtime_concat: the built-in method mode_order[code] names, as a
/// concat runs it (CLS as the first row read). The device kernels branch on the
/// code for each value, every thread of a launch the same way; the host passes
/// visit it once a pass (with_mode_of).
struct chosen_mode {
  static constexpr method_kind kind = method_kind::sequence;
  /// What concat<…> joins its modes' names from; runtime_concat::name() says the set's.
  static constexpr std::string_view name = "a chosen mode";
  static constexpr bool keeps_state = true;

  std::uint8_t code = 0;

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  /// `work` called with the method the code names (the host passes' work is host code).
  SEQPOOL_EXEC_CHECK_DISABLE
  template <class Work>
  SEQPOOL_HOST_DEVICE decltype(auto) visit(Work&& work) const {
    switch (code) {
      case 0:
        return work(first_read{});
      case 1:
        return work(max{});
      case 2:
        return work(mean{});
      case 3:
        return work(mean_sqrt_len{});
      case 4:
        return work(weighted_mean{});
      default:
        return work(last{});
    }
  }

  SEQPOOL_HOST_DEVICE float identity() const {
    return visit([](const auto& method) { return method.identity(); });
  }
  SEQPOOL_HOST_DEVICE float accumulate(float pooled, float row_value, std::int64_t position) const {
    return visit(
        [&](const auto& method) { return seqpool::detail::accumulate_at(method, pooled, row_value, position); });
  }
  SEQPOOL_HOST_DEVICE float merge(float pooled, float partial) const {
    return visit([&](const auto& method) { return method.merge(pooled, partial); });
  }
  SEQPOOL_HOST_DEVICE float finish(float pooled, std::int64_t prompt_len) const {
    return visit([&](const auto& method) { return method.finish(pooled, prompt_len); });
  }
};

/// Joins of mode_order's names by '+', one per set of modes (bit k: mode k):
/// static text, so that a state begun by a runtime_concat names it after its pooler is gone.
struct joined_sets {
  static constexpr std::size_t longest = [] {
    std::size_t length = mode_order.size() - 1;
    for (const std::string_view name : mode_order) length += name.size();
    return length;
  }();
  std::array<std::array<char, longest>, 1u << mode_codes> text{};
  std::array<std::size_t, 1u << mode_codes> length{};

  constexpr joined_sets() {
    for (unsigned set = 0; set < text.size(); ++set)
      for (int code = 0; code < mode_codes; ++code) {
        if ((set >> code & 1u) == 0) continue;
        if (length[set] > 0) text[set][length[set]++] = '+';
        for (const char c : mode_order[code]) text[set][length[set]++] = c;
      }
  }

  constexpr std::string_view operator[](unsigned set) const { return {text[set].data(), length[set]}; }
};
inline constexpr joined_sets set_names{};

/// One address per set of modes: what a state begun by a runtime_concat names its method by.
inline constexpr std::array<char, 1u << mode_codes> set_tags{};

/// A slot's mode type, as a class template: nvcc's front end substitutes an
/// alias template before the host compiler sees the pack expansion, which
/// then expands nothing.
template <std::size_t>
struct chosen_slot {
  using type = chosen_mode;
};

template <class Slots>
struct chosen_concat;
template <std::size_t... Slot>
struct chosen_concat<std::index_sequence<Slot...>> {
  using type = concat<typename chosen_slot<Slot>::type...>;
};

}  // namespace detail_concat

/// A concat of `Modes` built-in sequence methods chosen at run time, each once,
/// in sentence-transformers' order (CLS, MAX, MEAN, MEAN_SQRT_LEN, weighted
/// MEAN, LAST): its name is theirs joined by '+' in that order, as
/// from_name() takes it ("cls+max+mean"). It pools as concat<…> of the same
/// modes does, bit for bit: one pass, each row value taken into every mode's
/// columns that keeps it. An instruction is left out where every mode leaves it out, and
/// refused where modes disagree.
template <int Modes>
class runtime_concat : public detail_concat::chosen_concat<std::make_index_sequence<Modes>>::type {
  static_assert(Modes >= 2 && Modes <= detail_concat::mode_codes,
                "seqpool: a runtime_concat joins two to six of the built-in sequence methods");
  using joined = typename detail_concat::chosen_concat<std::make_index_sequence<Modes>>::type;

 public:
  /// How its names are formed, for messages after the count of modes (and `seqpool-run --methods`).
  static constexpr std::string_view name_form =
      "cls, max, mean, mean_sqrt_len, weighted_mean and last, in that order, joined by '+' (\"cls+max+mean\")";

  /// The concat whose name is `wanted`, or nothing: no such name, or another count of modes.
  static std::optional<runtime_concat> from_name(std::string_view wanted) {
    unsigned set = 0;
    int last_code = -1;
    for (std::size_t at = 0; at <= wanted.size();) {
      const std::size_t plus = std::min(wanted.find('+', at), wanted.size());
      const int code = code_of(wanted.substr(at, plus - at));
      if (code <= last_code) return std::nullopt;  // unknown, repeated, or out of order
      set |= 1u << code;
      last_code = code;
      at = plus + 1;
    }
    if (std::popcount(set) != Modes) return std::nullopt;
    return runtime_concat(set);
  }

  /// Its modes' names joined by '+'.
  std::string_view name() const { return detail_concat::set_names[set_]; }

  /// What it does with an instruction: what its modes do, where they agree.
  seqpool::instruction_rule instruction() const {
    static constexpr std::array rules{cls::instruction,           max::instruction,           mean::instruction,
                                      mean_sqrt_len::instruction, weighted_mean::instruction, last::instruction};
    static_assert(rules.size() == detail_concat::mode_order.size());
    const int first = std::countr_zero(set_);
    for (int code = first + 1; code < detail_concat::mode_codes; ++code)
      if ((set_ >> code & 1u) != 0 && rules[code] != rules[first]) return seqpool::instruction_rule::refused;
    return rules[first];
  }

  /// One address per set of modes, for a state begun by it.
  const void* method_tag() const { return &detail_concat::set_tags[set_]; }

 private:
  explicit runtime_concat(unsigned set)
      : joined(modes_of_set(set, std::make_index_sequence<Modes>{})), set_(static_cast<std::uint8_t>(set)) {}

  static int code_of(std::string_view name) {
    for (int code = 0; code < detail_concat::mode_codes; ++code)
      if (detail_concat::mode_order[code] == name) return code;
    return -1;
  }

  /// The set's modes in code order, for Modes slots.
  template <std::size_t... Slot>
  static joined modes_of_set(unsigned set, std::index_sequence<Slot...>) {
    std::array<detail_concat::chosen_mode, Modes> modes{};
    std::size_t slot = 0;
    for (int code = 0; code < detail_concat::mode_codes; ++code)
      if ((set >> code & 1u) != 0) modes[slot++].code = static_cast<std::uint8_t>(code);
    return joined(modes[Slot]...);
  }

  std::uint8_t set_ = 0;  ///< bit k: mode k of mode_order (a byte, as the modes' codes are: no padding)
};

}  // namespace seqpool::method

namespace seqpool::detail {

template <int Modes>
inline constexpr int modes_of<method::runtime_concat<Modes>> = Modes;
template <int Modes>
inline constexpr bool names_itself<method::runtime_concat<Modes>> = true;
template <>
inline constexpr bool chosen_at_run_time<method::detail_concat::chosen_mode> = true;

}  // namespace seqpool::detail
