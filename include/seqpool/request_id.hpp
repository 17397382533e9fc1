// A request's id, as the engine names it: text or an integer.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace seqpool {

namespace detail {
template <class T, class... Of>
inline constexpr bool one_of = (std::same_as<T, Of> || ...);
}  // namespace detail

/// The integer types an id is given as: not bool, not a character type.
template <class T>
concept integer_id = std::integral<T> &&
    !detail::one_of<std::remove_cv_t<T>, bool, char, signed char, unsigned char, wchar_t, char8_t, char16_t, char32_t>;

/// A request's id, stable across the steps of its prompt: the engine's text
/// (vLLM's "cmpl-…") or integer (TensorRT-LLM's and llama.cpp's). An id is
/// its text, and an integer is the id its decimal text is: 7 and "7" are one
/// id. An id that is such a decimal — an integer in [0, 2^64), or its digits
/// without a leading zero — is held as that integer, so that a step of integer
/// ids is checked and its states found without formatting or hashing text.
/// Any other, a negative integer included, is held as its text.
class request_id {
 public:
  request_id() = default;  ///< the empty text
  request_id(std::string text) : text_(std::move(text)) { hold_as_number(); }
  request_id(std::string_view text) : request_id(std::string(text)) {}
  request_id(const char* text) : request_id(std::string(text)) {}
  template <integer_id Integer>
  request_id(Integer number) {
    if constexpr (std::is_signed_v<Integer>) {
      if (number < 0) {
        text_ = std::to_string(number);
        return;
      }
    }
    number_ = static_cast<std::uint64_t>(number);
    is_number_ = true;
  }

  /// Makes it the id `text`, reusing the storage of a text it holds.
  request_id& assign(std::string_view text) {
    text_.assign(text);
    number_ = 0;
    is_number_ = false;
    hold_as_number();
    return *this;
  }

  /// Whether the id is held as an integer (a decimal in [0, 2^64)).
  bool is_number() const noexcept { return is_number_; }
  /// The integer an id is held as; 0 for one held as text.
  std::uint64_t number() const noexcept { return number_; }
  /// The id's text: the decimal of one held as an integer.
  std::string str() const { return is_number_ ? std::to_string(number_) : text_; }

  /// A 64-bit hash for tables of ids, inline: an integer through two
  /// multiplies; text by its length, then 8 bytes at a time, each folded in
  /// by a multiply whose high bits are shifted down, the last 8 bytes
  /// (overlapping the word before) ending it, or the bytes of a text shorter
  /// than 8. Tables need their low bits spread, not a keyed hash: a step's ids
  /// are the engine's own.
  std::uint64_t hash() const noexcept {
    constexpr std::uint64_t odd = 0x9e37'79b9'7f4a'7c15u;
    const auto fold = [](std::uint64_t h, std::uint64_t word) {
      h = (h ^ word) * odd;
      return h ^ (h >> 29);
    };
    std::uint64_t h = 0;
    if (is_number_) {
      h = fold(~std::uint64_t{0}, number_);  // no text's length seeds it: text hashes apart from integers
    } else {
      const std::string& text = text_;
      const std::size_t size = text.size();
      h = size * odd;
      std::uint64_t word = 0;
      if (size < 8) {
        for (std::size_t k = 0; k < size; ++k) word |= std::uint64_t{static_cast<unsigned char>(text[k])} << (8 * k);
      } else {
        for (std::size_t k = 0; k + 8 < size; k += 8) {
          std::memcpy(&word, text.data() + k, 8);
          h = fold(h, word);
        }
        std::memcpy(&word, text.data() + size - 8, 8);
      }
      h = fold(h, word);
    }
    h *= 0xd6e8'feb8'6659'fd93u;
    return h ^ (h >> 32);
  }

  friend bool operator==(const request_id&, const request_id&) = default;

  /// Writes the id's text.
  friend std::ostream& operator<<(std::ostream& out, const request_id& id) {
    if (id.is_number_) return out << id.number_;
    return out << id.text_;
  }

 private:
  /// Holds a text that is a decimal in [0, 2^64) without a leading zero as its integer.
  void hold_as_number() {
    const std::string& text = text_;
    if (text.empty() || text[0] < '0' || text[0] > '9' || (text[0] == '0' && text.size() > 1)) return;
    std::uint64_t number = 0;
    const char* end = text.data() + text.size();
    const auto [stop, problem] = std::from_chars(text.data(), end, number);
    if (problem != std::errc{} || stop != end) return;
    text_.clear();  // keeps its storage for a later assign()
    number_ = number;
    is_number_ = true;
  }

  // Equal ids hold equal fields: a number's text is empty, a text's number 0.
  std::string text_;          ///< the id, where it is held as text
  std::uint64_t number_ = 0;  ///< the id, where it is held as an integer
  bool is_number_ = false;
};

}  // namespace seqpool

template <>
struct std::hash<seqpool::request_id> {
  std::size_t operator()(const seqpool::request_id& id) const noexcept { return id.hash(); }
};
