// What the host knows about one step: requests, their parameters, and the
// layout derived from them before anything reaches the device.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <seqpool/error.hpp>
#include <seqpool/request_id.hpp>
#include <seqpool/token_ids.hpp>

namespace seqpool {

enum class task : std::uint8_t { embed, classify, token_embed, token_classify };

constexpr std::string_view name(task pooling_task) {
  switch (pooling_task) {
    case task::embed:
      return "embed";
    case task::classify:
      return "classify";
    case task::token_embed:
      return "token_embed";
    case task::token_classify:
      return "token_classify";
  }
  return "unknown";
}

/// Token tasks give a matrix per request; sequence tasks give one vector.
constexpr bool is_token_task(task pooling_task) {
  return pooling_task == task::token_embed || pooling_task == task::token_classify;
}

/// Per-request knobs (SPEC section 2); requests in one group may differ.
/// Prompt positions [begin, end), pooled into a result row of their own.
struct token_span {
  std::int64_t begin = 0;
  std::int64_t end = 0;

  friend bool operator==(const token_span&, const token_span&) = default;
};

/// The longest list of token ids a request may drop. The planner checks the
/// list, and looks each prompt id up in it, on every step, and a chunked
/// request's state key copies it: 1024 ids (8 KiB) keeps that a small cost
/// beside the request's rows while holding any tokenizer's punctuation and
/// special tokens.
inline constexpr std::size_t max_drop_token_ids = 1024;

/// A request's chunks must all have the same params (the state was shaped by
/// the first): they are compared whole, so a new knob is checked with the rest.
struct pooling_params {
  bool use_activation = true;
  std::optional<std::int64_t> dimensions;        ///< matryoshka truncation (embed tasks)
  std::optional<std::int64_t> step_tag_id;       ///< STEP: keep rows whose token id equals it
  std::vector<std::int64_t> returned_token_ids;  ///< STEP: columns to keep; empty keeps all
  /// Sequence methods (late chunking): pool each span of the prompt into a result
  /// row of its own, in order; ascending, each non-empty, touching but not
  /// overlapping. Empty pools the whole prompt into one row.
  std::vector<token_span> spans;
  /// Sequence methods: the prompt's first instruction_len positions are an
  /// instruction (sentence-transformers' include_prompt=False), which methods
  /// that average or take the max over rows leave out; CLS and LAST read the
  /// rows they read without it. In [0, prompt_len); 0 pools every row.
  std::int64_t instruction_len = 0;
  /// Token methods (token filters): leave out of the rows the method chooses
  /// the prompt's first position (BOS/CLS), its last (EOS/SEP), and those whose
  /// token id is in drop_token_ids (ColBERT's skiplist): ascending, distinct,
  /// each ≥ 0, at most max_drop_token_ids of them.
  bool drop_first = false;
  bool drop_last = false;
  std::vector<std::int64_t> drop_token_ids;
  /// Sparse results: list only the top_k ids of the largest weights (of equal
  /// weights, the smaller ids), at least 1; absent lists every id above the floor.
  std::optional<std::int64_t> top_k;

  friend bool operator==(const pooling_params&, const pooling_params&) = default;
};

/// The first knob two params differ in, for messages; "a knob" for one not named here.
inline std::string_view differing_knob(const pooling_params& a, const pooling_params& b) {
  if (a.use_activation != b.use_activation) return "use_activation";
  if (a.dimensions != b.dimensions) return "dimensions";
  if (a.step_tag_id != b.step_tag_id) return "step_tag_id";
  if (a.returned_token_ids != b.returned_token_ids) return "returned_token_ids";
  if (a.spans != b.spans) return "spans";
  if (a.instruction_len != b.instruction_len) return "instruction_len";
  if (a.drop_first != b.drop_first) return "drop_first";
  if (a.drop_last != b.drop_last) return "drop_last";
  if (a.drop_token_ids != b.drop_token_ids) return "drop_token_ids";
  if (a.top_k != b.top_k) return "top_k";
  return "a knob";
}

struct request {
  request_id id;  ///< stable across steps; keys the chunked-prefill state
  seqpool::task task = task::embed;
  std::int64_t prompt_len = 0;     ///< tokens in the whole prompt
  std::int64_t num_computed = 0;   ///< prompt tokens pooled in earlier steps
  std::int64_t num_scheduled = 0;  ///< rows of this step's hidden states that belong to it
  /// Host ids of the whole prompt (64- or 32-bit), read only by methods that
  /// declare reads_token_ids, by requests that drop rows by id
  /// (params.drop_token_ids) and by token methods whose results are sparse
  /// (listed by id). plan() reads them before it returns and never after: the
  /// memory may be reused once it returns.
  token_ids prompt_token_ids;
  pooling_params params;
};

/// Where a padded sequence's padding sits: after its rows (encoders) or before
/// them (decoders pad on the left).
enum class padding : std::uint8_t { right, left };

/// Hidden states laid out [B, S, H], as padded engines hand them over (ONNX
/// Runtime, TensorRT, TEI's padded path), B being the batch's requests: request
/// i's num_scheduled rows are the first (right padding) or last (left padding)
/// of sequence i, whose first row is i·S. Padding rows are never read.
struct padded_rows {
  std::int64_t sequence_length = 0;  ///< S
  seqpool::padding padding = padding::right;
};

struct batch {
  std::vector<request> requests;
  std::optional<padded_rows> padded;  ///< none: rows packed in request order
};

/// One request's share of a step, derived on the host (SPEC section 2). Rows are
/// counted from the start of the request's task group.
struct chunk {
  std::int64_t row_begin = 0;
  std::int64_t num_scheduled = 0;
  std::int64_t num_computed = 0;
  std::int64_t prompt_len = 0;

  constexpr std::int64_t first_row() const { return row_begin; }
  constexpr std::int64_t last_row() const { return row_begin + num_scheduled - 1; }
  constexpr bool first_chunk() const { return num_computed == 0; }
  constexpr bool finished() const { return num_computed + num_scheduled == prompt_len; }
  constexpr bool chunked() const { return num_scheduled != prompt_len; }  ///< the request arrives in chunks
};

/// What a span of the prompt sees of a request's chunk: the chunk's rows within
/// the span, counted as a prompt of its own (positions from the span's start).
/// A span the chunk has not reached has none yet; one it has passed, all. Its
/// rows start within the chunk's, where it has none too: a row a kernel may
/// point at without reading.
constexpr chunk chunk_of_span(const chunk& part, token_span span) {
  const std::int64_t end = part.num_computed + part.num_scheduled;
  const std::int64_t from = std::clamp(part.num_computed, span.begin, span.end);
  const std::int64_t to = std::clamp(end, span.begin, span.end);
  return {.row_begin = part.row_begin + std::clamp<std::int64_t>(from - part.num_computed, 0, part.num_scheduled),
          .num_scheduled = to - from,
          .num_computed = from - span.begin,
          .prompt_len = span.end - span.begin};
}

/// A run of consecutive requests that share a task: one pooler handles it.
struct task_group {
  seqpool::task task = task::embed;
  std::size_t first_request = 0;
  std::size_t num_requests = 0;
  std::int64_t row_begin = 0;  ///< first row of hidden states that belongs to the group
  std::int64_t num_rows = 0;   ///< rows from row_begin to the end of its last request's rows
};

struct step_layout {
  /// One per request, in batch order, rows rebased to its group (lay_out();
  /// detail::lay_out_into() counts them from the step's first row).
  std::vector<chunk> chunks;
  std::vector<task_group> groups;
  std::int64_t num_rows = 0;        ///< the rows hidden states must have: Σ num_scheduled, or B·S padded
  std::int64_t scheduled_rows = 0;  ///< the rows the step's chunks read: Σ num_scheduled
};

namespace detail {

/// Throws for the first of `count` requests, in order, whose id an earlier one
/// already has; the k-th is requests[index_of(k)], and messages name that index.
/// An open-addressing table in `buckets` (whose storage it reuses) allocates at
/// most once, where a hash map would allocate a node per request. An entry
/// holds 1 + k in its low 32 bits (1 + k ≤ count fits: 2^32 requests of
/// sizeof(request) bytes each would take nearly a terabyte) and the high half of
/// the id's hash above them: a probe reads the other request's id (another
/// cache line, often another allocation) only where the two hashes agree.
template <class IndexOf>
void check_unique_ids(std::span<const request> requests, std::size_t count, IndexOf index_of,
                      std::vector<std::uint64_t>& buckets) {
  constexpr std::uint64_t low_half = 0xffff'ffffu;
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(2 * count, 16));
  buckets.assign(size, 0);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t index = index_of(k);
    const request_id& id = requests[index].id;
    const std::uint64_t hash = id.hash();
    const std::uint64_t tag = hash & ~low_half;
    std::size_t bucket = hash & (size - 1);
    for (; buckets[bucket] != 0; bucket = (bucket + 1) & (size - 1)) {
      if ((buckets[bucket] & ~low_half) != tag) continue;
      const std::size_t earlier = index_of((buckets[bucket] & low_half) - 1);
      if (requests[earlier].id == id)
        fail_request(index, id, "id", "appears twice in one step (first as request ", earlier, ")");
    }
    buckets[bucket] = tag | (k + 1);
  }
}

/// lay_out() into `layout`, reusing its storage and that of `id_table` (the
/// check of unique ids), but with each chunk's rows counted from the start of
/// the step's hidden states, as launches read them.
inline void lay_out_into(std::span<const request> requests, std::optional<padded_rows> padded, step_layout& layout,
                         std::vector<std::uint64_t>& id_table) {
  layout.chunks.clear();
  layout.groups.clear();
  layout.chunks.reserve(requests.size());
  if (padded) {
    if (padded->sequence_length < 1)
      detail::fail("padded.sequence_length", "must be at least 1, got ", padded->sequence_length);
    if (std::cmp_greater(requests.size(), std::numeric_limits<std::int64_t>::max() / padded->sequence_length))
      detail::fail("padded.sequence_length", "the step's rows overflow a 64-bit count");
    if (padded->padding != padding::right && padded->padding != padding::left)
      detail::fail("padded.padding", "must be padding::right or padding::left, got ",
                   static_cast<int>(padded->padding));
  }
  std::int64_t packed_rows = 0;
  // Integer ids that rise through the step are distinct without the table of check_unique_ids(), as an engine
  // that numbers its requests in order gives them.
  bool ids_rise = true;
  std::uint64_t last_number = 0;
  for (std::size_t index = 0; index < requests.size(); ++index) {
    const request& r = requests[index];
    ids_rise = ids_rise && r.id.is_number() && (index == 0 || r.id.number() > last_number);
    last_number = r.id.number();
    if (r.prompt_len < 1) detail::fail_request(index, r.id, "prompt_len", "must be at least 1, got ", r.prompt_len);
    if (r.num_computed < 0)
      detail::fail_request(index, r.id, "num_computed", "must not be negative, got ", r.num_computed);
    if (r.num_scheduled < 1)
      detail::fail_request(index, r.id, "num_scheduled", "must be at least 1, got ", r.num_scheduled);
    if (r.num_scheduled > r.prompt_len - r.num_computed)
      detail::fail_request(index, r.id, "num_computed + num_scheduled", r.num_computed, " + ", r.num_scheduled,
                           " exceeds prompt_len ", r.prompt_len);
    if (packed_rows > std::numeric_limits<std::int64_t>::max() - r.num_scheduled)
      detail::fail_request(index, r.id, "num_scheduled", "the step's rows overflow a 64-bit count");
    if (padded && r.num_scheduled > padded->sequence_length)
      detail::fail_request(index, r.id, "num_scheduled", r.num_scheduled, " exceeds the padded sequence length ",
                           padded->sequence_length);

    // The request's first row: after the rows before it, or in its own sequence.
    std::int64_t first_row = packed_rows;
    if (padded) {
      first_row = static_cast<std::int64_t>(index) * padded->sequence_length;
      if (padded->padding == padding::left) first_row += padded->sequence_length - r.num_scheduled;
    }
    if (layout.groups.empty() || layout.groups.back().task != r.task)
      layout.groups.push_back({.task = r.task, .first_request = index, .row_begin = first_row});
    task_group& group = layout.groups.back();
    layout.chunks.push_back({.row_begin = first_row,
                             .num_scheduled = r.num_scheduled,
                             .num_computed = r.num_computed,
                             .prompt_len = r.prompt_len});
    ++group.num_requests;
    group.num_rows = first_row + r.num_scheduled - group.row_begin;
    packed_rows += r.num_scheduled;
  }
  layout.num_rows = padded ? static_cast<std::int64_t>(requests.size()) * padded->sequence_length : packed_rows;
  layout.scheduled_rows = packed_rows;
  if (!ids_rise)
    detail::check_unique_ids(
        requests, requests.size(), [](std::size_t k) { return k; }, id_table);
}

}  // namespace detail

/// Checks the metadata every pooler relies on and derives the step's layout:
/// rows packed in request order, or `padded`. Throws seqpool::error naming the
/// request, its id and the field.
inline step_layout lay_out(std::span<const request> requests, std::optional<padded_rows> padded = std::nullopt) {
  step_layout layout;
  std::vector<std::uint64_t> id_table;
  detail::lay_out_into(requests, padded, layout, id_table);
  for (const task_group& group : layout.groups)
    for (std::size_t i = group.first_request; i < group.first_request + group.num_requests; ++i)
      layout.chunks[i].row_begin -= group.row_begin;
  return layout;
}

inline step_layout lay_out(const batch& step) { return lay_out(std::span<const request>(step.requests), step.padded); }

}  // namespace seqpool
