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

/// The hash of id text `text` (`held` 0) or of the integer held as `held`,
/// inline, one path for both forms: the length (an integer's seed apart),
/// then 8 bytes at a time, each folded in by a multiply whose high bits are
/// shifted down, the last 8 bytes (overlapping the word before) — or the
/// bytes of a text shorter than 8, or the integer — ending it. Tables need
/// their low bits spread, not a keyed hash: a step's ids are the engine's own.
constexpr std::uint64_t id_hash(std::string_view text, std::uint64_t held) noexcept {
  constexpr std::uint64_t odd = 0x9e37'79b9'7f4a'7c15u;
  const auto fold = [](std::uint64_t h, std::uint64_t word) {
    h = (h ^ word) * odd;
    return h ^ (h >> 29);
  };
  const std::size_t size = text.size();
  std::uint64_t h = held != 0 ? ~std::uint64_t{0} : size * odd;
  std::uint64_t word = held;
  if (size < 8) {
    for (std::size_t k = 0; k < size; ++k) word |= std::uint64_t{static_cast<unsigned char>(text[k])} << (8 * k);
  } else {
    for (std::size_t k = 0; k + 8 < size; k += 8) {
      std::memcpy(&word, text.data() + k, 8);
      h = fold(h, word);
    }
    std::memcpy(&word, text.data() + size - 8, 8);
  }
  h = fold(h, word) * 0xd6e8'feb8'6659'fd93u;
  return h ^ (h >> 32);
}

/// The empty text's hash: a default-made or moved-from id's.
inline constexpr std::uint64_t empty_id_hash = id_hash({}, 0);
}  // namespace detail

/// The integer types an id is given as: of at most 64 bits, not bool, not a
/// character type (int8_t and uint8_t are signed and unsigned char).
template <class T>
concept integer_id =
    std::integral<T> && sizeof(T) <= 8 &&
    !detail::one_of<std::remove_cv_t<T>, bool, char, signed char, unsigned char, wchar_t, char8_t, char16_t, char32_t>;

/// A request's id, stable across the steps of its prompt: the engine's text
/// (vLLM's "cmpl-…") or integer (TensorRT-LLM's and llama.cpp's). An id is
/// its text, and an integer is the id its decimal text is: 7 and "7" are one
/// id. An id that is such a decimal — an integer in [0, 2^64 − 1), or its
/// digits without a leading zero — is held as that integer, so that a step of
/// integer ids is checked and its states found without formatting or hashing
/// text. Any other, a negative integer and 2^64 − 1 included, is held as its text.
class request_id {
 public:
  request_id() : text_hash_(detail::empty_id_hash) {}  ///< the empty text
  request_id(std::string text) : text_(std::move(text)) { hold_as_number(); }
  request_id(std::string_view text) : request_id(std::string(text)) {}
  request_id(const char* text) : request_id(std::string(text)) {}
  template <integer_id Integer>
  request_id(Integer number) {
    if (std::cmp_less(number, 0) || std::cmp_equal(number, most)) {
      text_ = std::to_string(number);
      text_hash_ = detail::id_hash(text_, 0);
    } else {
      held_ = static_cast<std::uint64_t>(number) + 1;
    }
  }

  /// A moved-from id is the empty text.
  request_id(request_id&& other) noexcept
      : held_(other.held_), text_hash_(other.text_hash_), text_(std::move(other.text_)) {
    other.become_empty();
  }
  request_id& operator=(request_id&& other) noexcept {
    if (this == &other) return *this;
    text_ = std::move(other.text_);
    held_ = other.held_;
    text_hash_ = other.text_hash_;
    other.become_empty();
    return *this;
  }
  request_id(const request_id&) = default;
  /// The text first: where copying it throws, the id is as it was.
  request_id& operator=(const request_id& other) {
    text_ = other.text_;
    held_ = other.held_;
    text_hash_ = other.text_hash_;
    return *this;
  }

  /// Makes it the id `text`, reusing the storage of a text it holds.
  request_id& assign(std::string_view text) {
    text_.assign(text);
    held_ = 0;
    hold_as_number();
    return *this;
  }

  /// Whether the id is held as an integer (a decimal in [0, 2^64 − 1)).
  bool is_number() const noexcept { return held_ != 0; }
  /// The integer an id is held as; 0 for one held as text.
  std::uint64_t number() const noexcept { return held_ != 0 ? held_ - 1 : 0; }
  /// The id's text: the decimal of one held as an integer.
  std::string str() const { return held_ != 0 ? std::to_string(held_ - 1) : text_; }

  /// A 64-bit hash for tables of ids: a text's made with the text (a request's
  /// id is made once and planned at each of its chunks, and a table's probe
  /// then reads no text unless the hashes agree), an integer's from it.
  std::uint64_t hash() const noexcept { return held_ != 0 ? detail::id_hash({}, held_) : text_hash_; }

  friend bool operator==(const request_id&, const request_id&) = default;

  /// Writes the id's text, an integer's digits whatever the stream's format and locale.
  friend std::ostream& operator<<(std::ostream& out, const request_id& id) {
    if (id.held_ == 0) return out.write(id.text_.data(), static_cast<std::streamsize>(id.text_.size()));
    char digits[20];
    const auto written = std::to_chars(digits, digits + sizeof digits, id.held_ - 1);
    return out.write(digits, written.ptr - digits);
  }

 private:
  static constexpr std::uint64_t most = ~std::uint64_t{0};

  /// Makes it the empty text, as a moved-from id is.
  void become_empty() noexcept {
    text_.clear();
    held_ = 0;
    text_hash_ = detail::empty_id_hash;
  }

  /// Holds a text that is a decimal in [0, 2^64 − 1) without a leading zero as its integer.
  void hold_as_number() {
    // from_chars takes digits alone (no sign, no space); a leading zero it takes, which is not canonical.
    const char* const begin = text_.data();
    const char* const end = begin + text_.size();
    std::uint64_t number = 0;
    const auto [stop, problem] = std::from_chars(begin, end, number);
    if (problem != std::errc{} || stop != end || number == most || (*begin == '0' && end - begin > 1)) {
      text_hash_ = detail::id_hash(text_, 0);
      return;
    }
    text_.clear();  // keeps its storage for a later assign()
    held_ = number + 1;
    text_hash_ = 0;
  }

  // Equal ids hold equal fields: an integer holds no text and no text's hash, a text holds 0. The
  // comparison reads them in this order, the text last.
  std::uint64_t held_ = 0;       ///< 1 + the id, where it is held as an integer
  std::uint64_t text_hash_ = 0;  ///< detail::id_hash(text_, 0), where the id is held as text
  std::string text_;             ///< the id, where it is held as text
};

}  // namespace seqpool

template <>
struct std::hash<seqpool::request_id> {
  std::size_t operator()(const seqpool::request_id& id) const noexcept { return id.hash(); }
};
