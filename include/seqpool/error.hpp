// seqpool::error and the helpers that word its messages.
//
// Every check on a step's host metadata throws before any device work is launched
// or any state is touched, so a caller can fix the batch and retry the same step.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <seqpool/request_id.hpp>

namespace seqpool {

/// Bad input: a malformed batch, a configuration that does not fit the pooler, a
/// chunk that disagrees with the stored state. The message names the request
/// index, its id and the field.
class error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A failure reported by the device runtime (not the caller's input).
class device_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream text;
  (text << ... << parts);
  return text.str();
}

/// Appends `code` (below U+0100) as JSON writes it escaped: `\u00XX`.
inline void append_escaped(std::string& out, unsigned char code) {
  constexpr char digits[] = "0123456789abcdef";
  out += "\\u00";
  out += digits[code >> 4];
  out += digits[code & 0xf];
}

/// `text` in double quotes, for a message, as JSON may write a string: a quote
/// and a backslash escaped, each control character as \u00XX — NUL among them, which
/// would end the message where it is read as a C string (Python's exception,
/// a terminal's line) — and any other byte as it is (UTF-8 stays readable).
inline std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      append_escaped(out, byte);
    } else {
      out += c;
    }
  }
  return out + '"';
}

/// How a message names a request: `request 3 (id "r7")`.
inline std::string request_named(std::size_t index, std::string_view id) {
  return concat("request ", index, " (id ", quoted(id), ")");
}

/// Throws seqpool::error worded as `request 3 (id "r7"): num_scheduled: must be at least 1, got 0`.
template <class... Parts>
[[noreturn]] void fail_request(std::size_t index, const request_id& id, std::string_view field, const Parts&... what) {
  throw error(concat(request_named(index, id.str()), ": ", field, ": ", what...));
}

/// Throws seqpool::error for a problem that belongs to no single request.
template <class... Parts>
[[noreturn]] void fail(std::string_view field, const Parts&... what) {
  throw error(concat(field, ": ", what...));
}

}  // namespace detail
}  // namespace seqpool
