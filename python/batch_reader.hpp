// A step as Python gives it (arrays of lengths, ids, params), read into a batch
// kept from call to call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>

#include <seqpool/batch.hpp>
#include <seqpool/dlpack.hpp>
#include <seqpool/error.hpp>

#include "arguments.hpp"

namespace seqpool::python {

/// What a step read from Python's arguments holds until plan() has read it:
/// the tensors its requests' token ids lie in (and through them the memory
/// their producers exported), which plan() reads before it returns and never
/// after (SPEC section 2), and for a padded batch the shape its hidden states
/// must have.
struct step_inputs {
  std::vector<any_tensor> token_ids;
  std::optional<dlpack::padded_extents> padded;
};

class batch_reader {
 public:
  /// The step these arguments describe, but for its requests' tasks (the
  /// caller's to set), in the batch kept from call to call, so that its
  /// requests (their ids' storage, their knobs) are reused, not rebuilt;
  /// what it holds until plan() has read it goes into `inputs`.
  batch& read(nb::handle prompt_lens, nb::handle num_scheduled, nb::handle num_computed, nb::handle ids,
              nb::handle token_ids, nb::handle params, nb::handle sequence_length, const std::string& padding,
              step_inputs& inputs) {
    batch& step = step_;
    const std::vector<std::int64_t> lengths = read_integers(prompt_lens, "prompt_lens");
    const std::size_t count = lengths.size();
    step.requests.resize(count);
    step.padded.reset();
    if (padding != "right" && padding != "left")
      detail::fail("padding", "expected \"right\" or \"left\", got ", detail::quoted(padding));
    std::vector<std::int64_t> computed(count, 0);
    if (!num_computed.is_none()) {
      computed = read_integers(num_computed, "num_computed", count);
    }
    std::vector<std::int64_t> scheduled;
    if (!num_scheduled.is_none()) {
      scheduled = read_integers(num_scheduled, "num_scheduled", count);
    }
    for (std::size_t i = 0; i < count; ++i) {
      request& r = step.requests[i];
      r.prompt_len = lengths[i];
      r.num_computed = computed[i];
      // A negative count, which lay_out refuses first, leaves the default at 0: no difference overflows.
      const bool counted = lengths[i] >= 0 && computed[i] >= 0;
      r.num_scheduled = !scheduled.empty() ? scheduled[i] : counted ? lengths[i] - computed[i] : 0;
      r.prompt_token_ids = {};
      if (!(r.params == pooling_params{})) r.params = {};
    }
    read_ids(ids, step);
    if (scheduled.empty()) check_rest_scheduled(step);
    read_params(params, step);
    read_token_ids(token_ids, step, inputs.token_ids);
    if (!sequence_length.is_none())
      step.padded = padded_rows{.sequence_length = integer_argument(sequence_length, "sequence_length"),
                                .padding = padding == "right" ? padding::right : padding::left};
    inputs.padded = dlpack::padded_extents_of(step);
    return step;
  }

  /// A request id (`field`, or an entry of it): a str (into the storage of the
  /// text the id holds), or an int (anything with __index__ but a bool), which
  /// is the id of its decimal text.
  static void read_id(request_id& id, nb::handle given, const char* field) {
    if (nb::isinstance<nb::str>(given)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(given.ptr(), &size);
      if (text == nullptr) {  // a lone surrogate, which UTF-8 does not encode
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw nb::python_error();
        PyErr_Clear();
        detail::fail(field,
                     "a str id must be UTF-8 text (no lone surrogates), got " + nb::cast<std::string>(nb::repr(given)));
      }
      id.assign(std::string_view(text, static_cast<std::size_t>(size)));
      return;
    }
    const auto refuse = [&] {
      detail::fail(field,
                   "a request id is a str or an int in [-2^63, 2^64), got " + nb::cast<std::string>(nb::repr(given)));
    };
    if (is_bool(given)) refuse();
    const nb::object number = nb::steal(PyNumber_Index(given.ptr()));  // __index__ once
    if (!number.is_valid()) {
      clear_conversion_error();
      refuse();
    }
    if (std::uint64_t whole = 0; nb::try_cast(number, whole)) {
      id = whole;
      return;
    }
    std::int64_t negative = 0;
    if (!nb::try_cast(number, negative)) refuse();
    id = negative;
  }

 private:
  static void read_ids(nb::handle ids, batch& step) {
    const std::size_t count = step.requests.size();
    if (ids.is_none()) {
      for (std::size_t i = 0; i < count; ++i) step.requests[i].id = i;
      return;
    }
    any_tensor tensor;
    std::string refused;
    if (try_import(ids, tensor, refused)) {
      const std::vector<std::int64_t> numbers = integers_in(tensor, "ids", count, listed::requests);
      for (std::size_t i = 0; i < count; ++i) step.requests[i].id = numbers[i];
      return;
    }
    // A NumPy array of str ids is no tensor but a sequence of them; a tensor refused is neither.
    if (!is_entries(ids)) refuse_export("ids", refused);
    const nb::tuple entries = entries_of(ids, count, "ids", "a sequence of str or int ids, or a 1-D int tensor");
    for (std::size_t i = 0; i < count; ++i) read_id(step.requests[i].id, entries[i], "ids");
  }

  /// num_scheduled left out is the rest of each prompt: a request whose
  /// num_computed leaves none of it is refused as such, not as the count of
  /// rows made of it (lay_out() refuses a prompt_len or num_computed out of
  /// range itself).
  static void check_rest_scheduled(const batch& step) {
    for (std::size_t index = 0; index < step.requests.size(); ++index) {
      const request& r = step.requests[index];
      if (r.prompt_len >= 1 && r.num_computed >= r.prompt_len)
        detail::fail_request(index, r.id, "num_computed", r.num_computed, " leaves none of prompt_len ", r.prompt_len,
                             " to schedule (num_scheduled, left out, is the rest of each prompt)");
    }
  }

  static void read_params(nb::handle params, batch& step) {
    if (params.is_none()) return;
    pooling_params one;
    if (nb::try_cast(params, one)) {
      for (request& r : step.requests) r.params = one;
      return;
    }
    for_each_given(params, step.requests.size(), "params",
                   "a PoolingParams, or a sequence of them (None for the defaults)",
                   [&](std::size_t i, nb::handle item) {
                     const pooling_params* given = nullptr;
                     if (!nb::try_cast(item, given) || given == nullptr)
                       detail::fail("params", "entry ", i, " is not a PoolingParams or None");
                     step.requests[i].params = *given;
                   });
  }

  /// Each request's token ids, viewed where their tensor lies; the tensors
  /// (and through them the memory their producers exported) go into `kept`.
  /// One [B, L] tensor, a row a request (as vLLM's prompt_token_ids), or a
  /// sequence of 1-D tensors, None where a request has none.
  static void read_token_ids(nb::handle token_ids, batch& step, std::vector<any_tensor>& kept) {
    if (token_ids.is_none()) return;
    any_tensor rows;
    std::string refused;
    if (try_import(token_ids, rows, refused)) {
      dlpack::assign_token_ids(describe(rows), step);
      kept.push_back(std::move(rows));
      return;
    }
    if (!is_entries(token_ids)) refuse_export("token_ids", refused);
    for_each_given(token_ids, step.requests.size(), "token_ids",
                   "a [B, L] int tensor, or a sequence of 1-D int tensors (None where a request has none)",
                   [&](std::size_t i, nb::handle item) {
                     any_tensor tensor;
                     if (!try_tensor(item, tensor, "token_ids"))
                       detail::fail("token_ids", "entry ", i, " is not a tensor (an int32 or int64 array)");
                     step.requests[i].prompt_token_ids = dlpack::token_ids(describe(tensor));
                     kept.push_back(std::move(tensor));
                   });
  }

  /// Calls `read(i, entry)` for each entry of a per-request sequence that is not None.
  template <class Read>
  static void for_each_given(nb::handle given, std::size_t count, const char* field, const char* expected, Read read) {
    const nb::tuple entries = entries_of(given, count, field, expected);
    for (std::size_t i = 0; i < count; ++i)
      if (!entries[i].is_none()) read(i, entries[i]);
  }

  batch step_;
};

}  // namespace seqpool::python
