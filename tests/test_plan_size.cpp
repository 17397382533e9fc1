// What a step's image costs to send, as the audit counts it: token methods send
// nothing that grows with the rows they return (beyond a bit a row where a
// mask keeps some), a captured step's image grows with its capacity's
// requests, not its rows, and each launch of its graph sends what its batch
// uses, not the capacity. docs/PERFORMANCE.md (GPU) has the figures. And what
// planning costs the host: a plan made into one that has held as large a step
// allocates nothing (this program counts operator new), and what it keeps of
// the batch: nothing.
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/graph.hpp"
#include "support/prompts.hpp"
#include "support/reference.hpp"
#include "support/spaces.hpp"
#include "support/step.hpp"

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;
constexpr std::int64_t hidden_size = 8;

/// `requests` prompts of `prompt_len` rows, token ids tagging every eighth row with 7.
struct prompts {
  seqpool::batch step;
  std::vector<std::int64_t> ids;

  prompts(std::int64_t requests, std::int64_t prompt_len, task pooling_task, seqpool::pooling_params params = {}) {
    for (std::int64_t t = 0; t < prompt_len; ++t) ids.push_back(t % 8 == 0 ? 7 : 1);
    for (std::int64_t i = 0; i < requests; ++i) {
      step.requests.push_back(test::whole(test::id("r", i), pooling_task, prompt_len, params));
      step.requests.back().prompt_token_ids = ids;
    }
  }
};

/// Calls to operator new, from every thread of this program.
std::atomic<std::int64_t> allocations{0};

/// The bytes one step of `batch` uploads.
template <class Pooler>
std::int64_t upload_bytes(typename Pooler::space_type& space, Pooler& pooler, const seqpool::batch& batch) {
  seqpool::state_store<typename Pooler::space_type> state(space);
  std::int64_t rows = 0;
  for (const seqpool::request& r : batch.requests) rows += r.num_scheduled;
  const auto hidden = test::to_space(space, std::vector<float>(static_cast<std::size_t>(rows * hidden_size), 1.0f));
  const seqpool::step_plan plan = pooler.plan(batch, state);
  pooler.reserve(plan, state);
  seqpool::buffer<float, typename Pooler::space_type> output(space, static_cast<std::size_t>(plan.output_size));
  const seqpool::audit_scope scope(space.audit());
  pooler.forward(seqpool::make_hidden_view(hidden.data(), rows, hidden_size), plan, state, output.span());
  return scope.counts().upload_bytes;
}

}  // namespace

// Not inlined: g++ would otherwise see free() meet a pointer from operator new.
[[gnu::noinline]] void* operator new(std::size_t bytes) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(bytes == 0 ? 1 : bytes)) return memory;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* memory) noexcept { std::free(memory); }
[[gnu::noinline]] void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

TEST_CASE("a multi_pooler's step on the host holds its parts' passes without allocating: reserve() made the room") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  using dense = seqpool::pooler<method::mean, head::embed, seqpool::host_space>;
  using tokens = seqpool::pooler<method::all, head::embed, seqpool::host_space>;
  seqpool::multi_pooler<dense, tokens> parts(space, {dense(space, hidden_size)}, {tokens(space, hidden_size)});
  const seqpool::batch step = prompts(64, 16, task::embed).step;
  const auto hidden = test::to_space(space, std::vector<float>(64 * 16 * hidden_size, 1.0f));
  seqpool::parts_plan plan;
  parts.plan(step, state, plan);
  parts.reserve(plan, state);
  seqpool::buffer<float, seqpool::host_space> pooled(space, static_cast<std::size_t>(plan.parts[0].output_size));
  seqpool::buffer<float, seqpool::host_space> rows(space, static_cast<std::size_t>(plan.parts[1].output_size));
  const auto view = seqpool::make_hidden_view(hidden.data(), 64 * 16, hidden_size);
  for (int k = 0; k < 3; ++k) {
    parts.plan(step, state, plan);
    parts.reserve(plan, state);
    const std::int64_t before = allocations.load();
    parts.forward(view, plan, state, pooled.span(), rows.span());
    CHECK(allocations.load() == before);
  }
}

TEST_CASE_TEMPLATE("ALL and STEP send the same image for prompts of 16 rows and of 1024", Space, seqpool::host_space,
                   seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  seqpool::pooler<method::all, head::embed, Space> all(space, hidden_size);
  CHECK(upload_bytes(space, all, prompts(64, 1024, task::token_embed).step) ==
        upload_bytes(space, all, prompts(64, 16, task::token_embed).step));
  seqpool::pooler<method::step, head::embed, Space> steps(space, hidden_size);
  CHECK(upload_bytes(space, steps, prompts(64, 1024, task::token_embed).step) ==
        upload_bytes(space, steps, prompts(64, 16, task::token_embed).step));
  // Every eighth row tagged: a mask of a bit a row the tags span, and the bases
  // of at most the policy's gathering units (fewer for fewer rows).
  const seqpool::pooling_params tagged{.step_tag_id = 7};
  const std::int64_t longer = upload_bytes(space, steps, prompts(64, 1024, task::token_embed, tagged).step);
  const std::int64_t shorter = upload_bytes(space, steps, prompts(64, 16, task::token_embed, tagged).step);
  constexpr std::int64_t units = seqpool::detail::algorithms_of<Space>::policy::gather_units;
  CHECK(longer - shorter <= 64 * (1024 - 16) / 8 + 16 + (units + 1) * std::int64_t{sizeof(seqpool::detail::gather_base)});
}

TEST_CASE_TEMPLATE("ALL without drop_token_ids lists no position, whatever a prompt's rows", Space, seqpool::host_space,
                   seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  const seqpool::state_store<Space> state(space);
  seqpool::pooler<method::all, head::embed, Space> all(space, hidden_size);
  // Whole prompts, and prompts less their first and last rows, of 16 rows and
  // of 1024: each request's rows are one run found from its chunk alone, where
  // a method that lists positions would leave one a row in the planner's list.
  for (const std::int64_t prompt_len : {16, 1024}) {
    for (const seqpool::pooling_params& params :
         {seqpool::pooling_params{}, seqpool::pooling_params{.drop_first = true, .drop_last = true}}) {
      CAPTURE(prompt_len);
      const prompts batch(64, prompt_len, task::token_embed, params);
      const seqpool::step_plan plan = all.plan(batch.step, state);
      const seqpool::detail::step_program& program = seqpool::detail::plan_access::program(plan);
      CHECK(program.scratch.planner.positions.empty());
      CHECK(program.shares[0].records.gathers.size() == 64);
    }
  }
  // STEP's tags are found a position at a time: the contrast this test draws.
  seqpool::pooler<method::step, head::embed, Space> steps(space, hidden_size);
  const prompts tagged(64, 1024, task::token_embed, {.step_tag_id = 7});
  const seqpool::step_plan plan = steps.plan(tagged.step, state);
  CHECK(seqpool::detail::plan_access::program(plan).scratch.planner.positions.size() == 64 * 1024 / 8);
}

TEST_CASE_TEMPLATE("a sequence method sends a fixed number of bytes a request, whatever its rows", Space,
                   seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  seqpool::pooler<method::cls, head::embed, Space> cls(space, hidden_size);
  // Requests `first_odd`, `first_odd` + `apart`, … with knobs of their own.
  const auto per_request = [&](std::int64_t prompt_len, const seqpool::pooling_params& odd, std::size_t first_odd = 1,
                               std::size_t apart = 2) {
    const auto batch = [&](std::int64_t requests) {
      seqpool::batch step = prompts(requests, prompt_len, task::embed).step;
      for (std::size_t i = first_odd; i < step.requests.size(); i += apart) step.requests[i].params = odd;
      return step;
    };
    return (upload_bytes(space, cls, batch(4096)) - upload_bytes(space, cls, batch(64))) / (4096 - 64);
  };
  // A request's entry (28 bytes) over the share's common record; on the device
  // a warp pools it whole from its entry, blocks of eight (a work record of 12
  // bytes); the host's items read a tile (24) each.
  const std::int64_t alike = per_request(1, {});
  const std::int64_t longer = per_request(100, {});
  constexpr std::int64_t goal = std::is_same_v<Space, seqpool::host_space> ? 52 : 32;
  CHECK(alike <= goal);
  CHECK(longer == alike);
  // Every other request with a knob of its own is held in full as well: its
  // record (72 bytes) and its entry of the state table (8).
  const std::int64_t mixed = per_request(1, {.use_activation = false});
  CHECK(mixed == alike + std::int64_t{sizeof(seqpool::detail::request_record) + sizeof(float*)} / 2);
  // The common record is the one most requests share, not the first's.
  CHECK(per_request(1, {.use_activation = false}, 0, 4096) == alike);
  MESSAGE("CLS sends ", alike, " bytes a request, ", mixed, " where every other has a knob of its own");
}

TEST_CASE_TEMPLATE(
    "a request record's entry holds its fields where it is entered over the common record, none where "
    "it names a detail",
    Space, seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  seqpool::pooler<method::cls, head::embed, Space> cls(space, hidden_size);
  const seqpool::state_store<Space> state(space);
  // An odd first record (first entered over itself, then a detail, once the
  // vote has chosen the others'), an odd last one, and like ones between.
  seqpool::batch step = prompts(5, 3, task::embed).step;
  step.requests.front().params.use_activation = false;
  step.requests.back().params.use_activation = false;
  const seqpool::step_plan plan = cls.plan(step, state);
  const seqpool::detail::share_records& records = seqpool::detail::plan_access::program(plan).shares[0].records;
  REQUIRE(records.entries.size() == 5);
  CHECK(records.details.size() == 2);
  for (const std::size_t k : {std::size_t{0}, std::size_t{4}}) {
    CAPTURE(k);
    const seqpool::detail::request_entry& entry = records.entries[k];
    CHECK(entry.detail >= 0);
    CHECK(entry.prompt_len == 0);
    CHECK(entry.position_offset == 0);
    CHECK(entry.offset == 0);
  }
  for (std::size_t k = 1; k < 4; ++k) {
    CAPTURE(k);
    CHECK(records.entries[k].detail == -1);
    CHECK(records.entries[k].prompt_len == 3);
  }
}

TEST_CASE_TEMPLATE("the vote for the common record leaves a record held in full held, and every result its own", Space,
                   seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  seqpool::pooler<method::last, head::embed, Space> last(space, hidden_size);
  seqpool::state_store<Space> state(space);
  std::vector<float> hidden(static_cast<std::size_t>(64 * hidden_size));
  for (std::size_t v = 0; v < hidden.size(); ++v) hidden[v] = static_cast<float>((v * 7) % 11) - 4.5f;
  const auto rows_of = [&](std::int64_t first_row, std::int64_t rows) {
    return std::vector<float>(hidden.begin() + first_row * hidden_size,
                              hidden.begin() + (first_row + rows) * hidden_size);
  };
  // A step of a chunk of a chunked request, an odd request the first
  // entered over itself, and three like ones: the vote chooses theirs.
  const auto step_with = [](seqpool::request chunk, const std::string& round) {
    seqpool::batch step{{std::move(chunk)}};
    step.requests.push_back(test::whole("odd" + round, task::embed, 3, {.use_activation = false}));
    for (std::int64_t i = 0; i < 3; ++i)
      step.requests.push_back(test::whole(test::id("like" + round, i), task::embed, 3));
    return step;
  };
  const auto check_step = [&](const seqpool::batch& step, const std::vector<float>& rows, bool finishes) {
    seqpool::step_plan plan;
    const test::results pooled = test::run_step(space, last, state, step, rows, hidden_size, plan);
    const seqpool::detail::share_records& records = seqpool::detail::plan_access::program(plan).shares[0].records;
    REQUIRE(records.entries.size() == 5);
    // The chunk's record is held in full (its state is its detail's), the odd one a detail beside it.
    CHECK(records.details.size() == 2);
    CHECK(records.entries[0].detail >= 0);
    CHECK(records.entries[1].detail >= 0);
    for (std::size_t k = 2; k < 5; ++k) CHECK(records.entries[k].detail == -1);
    CHECK(pooled[0].has_value() == finishes);
    for (std::size_t i = 1; i < 5; ++i) {
      CAPTURE(i);
      REQUIRE(pooled[i].has_value());
      const std::vector<float> prompt(rows.begin() + static_cast<std::int64_t>(3 + 3 * (i - 1)) * hidden_size,
                                      rows.begin() + static_cast<std::int64_t>(6 + 3 * (i - 1)) * hidden_size);
      test::check_close(*pooled[i], test::reference("last", prompt, hidden_size, step.requests[i], {}, hidden_size),
                        1e-6);
    }
    return pooled;
  };
  check_step(step_with(test::part("chunked", task::embed, 6, 0, 3), "a"), rows_of(0, 15), false);
  // Its last chunk's record is, but for its entry's fields, the common one (LAST keeps no reduction).
  const test::results second =
      check_step(step_with(test::part("chunked", task::embed, 6, 3, 3), "b"), rows_of(15, 15), true);
  std::vector<float> prompt = rows_of(0, 3);
  const std::vector<float> rest = rows_of(15, 3);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  test::check_close(
      *second[0], test::reference("last", prompt, hidden_size, test::whole("chunked", task::embed, 6), {}, hidden_size),
      1e-6);
}

/// Checks that two lists of records are the same, byte for byte.
template <class Record>
void check_same_records(const std::vector<Record>& planned, const std::vector<Record>& expected) {
  static_assert(std::has_unique_object_representations_v<Record>, "compared byte for byte: no padding");
  REQUIRE(planned.size() == expected.size());
  if (!planned.empty()) CHECK(std::memcmp(planned.data(), expected.data(), planned.size() * sizeof(Record)) == 0);
}

/// Checks that two plans hold the same shares, records and results.
void check_same_plan(const seqpool::step_plan& planned, const seqpool::step_plan& expected) {
  const auto& shares = seqpool::detail::plan_access::program(planned).shares;
  const auto& expected_shares = seqpool::detail::plan_access::program(expected).shares;
  REQUIRE(shares.size() == expected_shares.size());
  for (std::size_t s = 0; s < shares.size(); ++s) {
    const seqpool::detail::share& share = shares[s];
    const seqpool::detail::share& other = expected_shares[s];
    check_same_records(share.records.entries, other.records.entries);
    check_same_records(share.records.tiles, other.records.tiles);
    check_same_records(share.records.works, other.records.works);
    check_same_records(share.records.combines, other.records.combines);
    check_same_records(share.records.linears, other.records.linears);
    CHECK(share.records.details == other.records.details);
    CHECK(share.header.common == other.header.common);
    CHECK(share.image_bytes == other.image_bytes);
    CHECK(share.output_values == other.output_values);
    CHECK(share.workspace_floats == other.workspace_floats);
    CHECK(share.arrivals == other.arrivals);
    CHECK(share.result_rows == other.result_rows);
  }
  REQUIRE(planned.results.size() == expected.results.size());
  for (std::size_t i = 0; i < planned.results.size(); ++i) {
    CAPTURE(i);
    REQUIRE(planned.results[i].has_value() == expected.results[i].has_value());
    if (!planned.results[i]) continue;
    CHECK(planned.results[i]->offset == expected.results[i]->offset);
    CHECK(planned.results[i]->rows == expected.results[i]->rows);
    CHECK(planned.results[i]->cols == expected.results[i]->cols);
  }
}

TEST_CASE_TEMPLATE("a request like its share's model is planned as the same request with one span over its prompt",
                   Space, seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  // Where the family's tiles do not depend on the share, a sequence request
  // whose record would be the share's common one but for its entry's fields
  // takes the planner's short pass; a span over its whole prompt pools the same
  // rows into the same result through the general one. Drawn steps mix such
  // requests with unlike ones (other knobs and widths, prompts split into tiles
  // — 200 rows and more on the host, 5000 on the device —, first chunks), into
  // float, bf16 and int8 results, and projected ones, which never take the
  // short pass (nor do the device's int8 results, all drafted).
  Space space;
  seqpool::state_store<Space> state(space);
  const std::vector<float> weights(hidden_size * hidden_size, 0.25f);
  const std::vector<float> bias(hidden_size, 0.5f);
  const std::vector<float> low(hidden_size, -1.0f);
  const std::vector<float> high(hidden_size, 1.0f);
  seqpool::pooler<method::mean, head::embed, Space> mean(space, hidden_size);
  seqpool::pooler<method::last, head::embed, Space, seqpool::bfloat16> last(space, hidden_size);
  seqpool::pooler<method::mean, head::embed, Space, std::int8_t> quantized(space, hidden_size);
  quantized.set_ranges({low, high});
  seqpool::pooler<method::cls, head::embed, Space> projected(
      space, hidden_size, {},
      head::embed(seqpool::linear_layer{weights.data(), bias.data(), hidden_size, hidden_size}));
  std::mt19937 draw(2026);
  const std::int64_t lengths[] = {1, 1, 1, 2, 3, 17, 200, 3000, 5000};
  for (int round = 0; round < 30; ++round) {
    CAPTURE(round);
    seqpool::batch step;
    seqpool::batch spanned;
    for (int i = 0; i < 40; ++i) {
      const std::int64_t prompt_len = lengths[draw() % std::size(lengths)];
      seqpool::pooling_params params;
      params.use_activation = draw() % 4 != 0;
      if (draw() % 5 == 0) params.dimensions = 4;
      const std::string id = test::id("r", round * 100 + i);
      if (draw() % 10 == 0) {
        step.requests.push_back(test::part(id, task::embed, prompt_len + 1, 0, prompt_len, params));
        spanned.requests.push_back(step.requests.back());
        continue;
      }
      step.requests.push_back(test::whole(id, task::embed, prompt_len, params));
      params.spans = {{0, prompt_len}};
      spanned.requests.push_back(test::whole(id, task::embed, prompt_len, params));
    }
    check_same_plan(mean.plan(step, state), mean.plan(spanned, state));
    check_same_plan(last.plan(step, state), last.plan(spanned, state));
    check_same_plan(quantized.plan(step, state), quantized.plan(spanned, state));
    check_same_plan(projected.plan(step, state), projected.plan(spanned, state));
  }
}

/// Hidden states of `rows` rows of `width` bf16 values whose pages are only
/// given where written: rows past 2^31 without 16 GB of memory.
class sparse_hidden {
 public:
  sparse_hidden(std::int64_t rows, std::int64_t width) : bytes_(static_cast<std::size_t>(rows * width) * 2) {
    memory_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(memory_ != MAP_FAILED);
  }
  ~sparse_hidden() { ::munmap(memory_, bytes_); }
  sparse_hidden(const sparse_hidden&) = delete;
  sparse_hidden& operator=(const sparse_hidden&) = delete;
  seqpool::bfloat16* data() const { return static_cast<seqpool::bfloat16*>(memory_); }

 private:
  std::size_t bytes_;
  void* memory_;
};

TEST_CASE_TEMPLATE("a request whose rows lie past 2^31 is pooled whole or split, and its 16-bit result drafted", Space,
                   seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  // Two one-row prompts padded to S = 2^30 + 1 on the left: the first's row is
  // S - 1, within an entry's 32 bits; the second's 2S - 1 = 2^31 + 1, past them.
  constexpr std::int64_t width = 8;
  constexpr std::int64_t sequence_length = (std::int64_t{1} << 30) + 1;
  const sparse_hidden hidden(2 * sequence_length, width);
  for (std::int64_t c = 0; c < width; ++c) {
    hidden.data()[(sequence_length - 1) * width + c] = seqpool::bfloat16(static_cast<float>(1 + c));
    hidden.data()[(2 * sequence_length - 1) * width + c] = seqpool::bfloat16(static_cast<float>(10 + c));
  }
  seqpool::batch step{.padded =
                          seqpool::padded_rows{.sequence_length = sequence_length, .padding = seqpool::padding::left}};
  for (const char* id : {"a", "b"}) step.requests.push_back(test::whole(id, task::embed, 1, {.use_activation = false}));
  const auto pooled = [&]<class Result>(Result) {
    Space space;
    seqpool::state_store<Space> state(space);
    seqpool::pooler<method::mean, head::embed, Space, Result> mean(space, width);
    const seqpool::step_plan plan = mean.plan(step, state);
    mean.reserve(plan, state);
    seqpool::buffer<Result, Space> output(space, static_cast<std::size_t>(plan.output_size));
    const seqpool::audit_scope scope(space.audit());
    mean.forward(seqpool::make_hidden_view<seqpool::bfloat16>(hidden.data(), 2 * sequence_length, width), plan, state,
                 output.span());
    test::check_sync_contract(scope.counts());
    std::vector<float> values;
    for (const Result value : test::to_host(space, output)) values.push_back(seqpool::detail::to_float(value));
    std::vector<float> rows;
    for (const auto& result : plan.results)
      for (std::int64_t c = 0; c < width; ++c) rows.push_back(values[static_cast<std::size_t>(result->offset + c)]);
    return rows;
  };
  std::vector<float> expected;
  for (const float first : {1.0f, 10.0f})
    for (std::int64_t c = 0; c < width; ++c) expected.push_back(first + static_cast<float>(c));
  CHECK(pooled(float{}) == expected);
  CHECK(pooled(seqpool::bfloat16{}) == expected);
}

TEST_CASE("a capacity bounds no workspace for the rows a device token method's dense layers read where they lie") {
  const seqpool::capacity limits{.requests = 4, .rows = 4096, .result_rows = 4096, .columns = 0};
  for (const std::int64_t between : {std::int64_t{0}, std::int64_t{23}}) {
    CAPTURE(between);
    const seqpool::detail::pooler_shape shape{
        .hidden_size = 1024, .has_linear = true, .between_floats = between, .result_bytes = 4};
    using device_planner = seqpool::detail::planner<seqpool::detail::device::algorithms<>>;
    using host_planner = seqpool::detail::planner<seqpool::detail::host::algorithms<>>;
    // The host gathers each returned row into the workspace for the layers' pass.
    CHECK(host_planner::bounds(limits, shape, 128, true).workspace_floats >=
          limits.result_rows * (shape.hidden_size + between));
    // The device's first layer reads each where it lies: only a stack's outputs between layers take room.
    CHECK(device_planner::bounds(limits, shape, 128, true).workspace_floats ==
          limits.result_rows * between + 6 * limits.requests);
  }
}

TEST_CASE("a block finds its first records from the image's start, beside the header: works or gather bases") {
  namespace detail = seqpool::detail;
  detail::image_header header;
  detail::lay_out_image({.requests = 3, .tiles = 5, .works = 4, .linears = 3}, header);
  CHECK(header.works.offset == detail::first_section_offset);
  detail::lay_out_image({.requests = 3, .gathers = 6, .gather_bases = 17, .mask_words = 2, .columns = 4}, header);
  CHECK(header.gather_bases.offset == detail::first_section_offset);
  // A captured step's image is laid out for its capacity's counts: a share has works or bases, never both.
  const seqpool::capacity limits{.requests = 64, .rows = 4096, .result_rows = 4096, .columns = 16};
  const detail::pooler_shape shape{.hidden_size = 1024, .has_linear = true, .result_bytes = 4};
  using device_planner = detail::planner<detail::device::algorithms<>>;
  const detail::share_bounds pooled = device_planner::bounds(limits, shape, 128, false);
  const detail::share_bounds gathered = device_planner::bounds(limits, shape, 128, true);
  CHECK((pooled.records.works > 0 && pooled.records.gather_bases == 0));
  CHECK((gathered.records.gather_bases > 0 && gathered.records.works == 0));
}

TEST_CASE("a captured token step's image grows with its capacity's requests, not with its rows") {
  using device_omp = seqpool::device_space<seqpool::omp_backend>;
  device_omp space;
  const auto image = [&](std::int64_t rows) {
    seqpool::pooler<method::step, head::embed, device_omp> steps(space, hidden_size);
    steps.reserve_capacity({.requests = 64, .rows = rows, .result_rows = rows});
    return static_cast<std::int64_t>(steps.reserve_graph().bytes());
  };
  // A mask bit a row, and nothing else more.
  CHECK(image(65536) - image(1024) <= (65536 - 1024) / 8 + 16);
}

TEST_CASE("a captured step uploads what its batch uses of the capacity's image, as an eager step does") {
  using device_omp = seqpool::device_space<seqpool::omp_backend>;
  using graph = test::captured_graph<device_omp>;
  device_omp space(graph::backend());
  seqpool::state_store<device_omp> state(space);
  seqpool::pooler<method::cls, head::embed, device_omp> eager(space, hidden_size);
  seqpool::pooler<method::cls, head::embed, device_omp> captured(space, hidden_size);
  const seqpool::capacity limits{.requests = 4096, .rows = 4096};
  captured.reserve_capacity(limits);
  auto home = captured.reserve_graph();
  seqpool::buffer<float, device_omp> hidden(space, static_cast<std::size_t>(limits.rows * hidden_size));
  seqpool::buffer<float, device_omp> output(space, static_cast<std::size_t>(captured.output_capacity()));
  const auto view = seqpool::make_hidden_view(hidden.data(), limits.rows, hidden_size);

  const seqpool::batch first = prompts(1, 1, task::embed).step;
  seqpool::step_plan plan = captured.plan(first, state);
  captured.reserve(plan, state);
  std::int64_t sent = 0;
  std::optional<graph> replays;
  {
    const seqpool::audit_scope scope(space.audit());
    graph::begin(space);
    captured.capture(view, plan, state, output.span(), home);
    replays.emplace(space);
    sent = scope.counts().upload_bytes;
  }
  CHECK(sent == upload_bytes(space, eager, first));
  replays->launch();
  home.mark_launched();
  // The capacity's image is over 400 KB; a batch of 64 requests sends its own.
  const seqpool::batch next = prompts(64, 1, task::embed).step;
  plan = captured.plan(next, state);
  captured.reserve(plan, state);
  {
    const seqpool::audit_scope scope(space.audit());
    captured.restage(plan, state, home);
    sent = scope.counts().upload_bytes;
  }
  CHECK(sent == upload_bytes(space, eager, next));
  CHECK(static_cast<std::size_t>(sent) * 50 < home.bytes());
}

/// STEP, counting the prompt positions its select() and count() read.
struct counted_step : method::step {
  static constexpr std::string_view name = "counted_step";
  std::int64_t* read = nullptr;

  void select(const seqpool::request& r, std::int64_t begin, std::int64_t end,
              std::vector<std::int64_t>& positions) const {
    *read += end - begin;
    method::step::select(r, begin, end, positions);
  }
  std::int64_t count(const seqpool::request& r, std::int64_t begin, std::int64_t end) const {
    *read += end - begin;
    return method::step::count(r, begin, end);
  }
};

TEST_CASE("a later chunk's plan reads its own chunk's positions: the state store counts the rows of the others") {
  constexpr std::int64_t prompt_len = 4096, chunk_rows = 128, chunks = prompt_len / chunk_rows;
  std::vector<std::int64_t> ids(prompt_len, 1);
  for (std::int64_t t = 0; t < prompt_len; t += 3) ids[static_cast<std::size_t>(t)] = 7;
  const std::vector<float> rows = test::drawn_values(prompt_len * hidden_size, 11);
  // The tag alone (the other chunks' rows counted by count()), and with a
  // filter by id (listed by select() and filtered): each keeps a third of the rows.
  for (const seqpool::pooling_params& params :
       {seqpool::pooling_params{.step_tag_id = 7}, seqpool::pooling_params{.step_tag_id = 7, .drop_token_ids = {1}}}) {
    CAPTURE(params.drop_token_ids.size());
    seqpool::host_space space;
    seqpool::state_store<seqpool::host_space> state(space);
    std::int64_t read = 0;
    seqpool::pooler<counted_step, head::embed, seqpool::host_space> chunked(space, hidden_size,
                                                                            counted_step{{}, &read});
    std::vector<float> last;
    for (std::int64_t k = 0; k < chunks; ++k) {
      seqpool::batch step{{test::part("doc", task::token_embed, prompt_len, k * chunk_rows, chunk_rows, params)}};
      step.requests[0].prompt_token_ids = ids;
      const seqpool::step_plan plan = chunked.plan(step, state);
      chunked.reserve(plan, state);
      seqpool::buffer<float, seqpool::host_space> output(space, static_cast<std::size_t>(plan.output_size));
      chunked.forward(seqpool::make_hidden_view(rows.data() + k * chunk_rows * hidden_size, chunk_rows, hidden_size),
                      plan, state, output.span());
      last.assign(output.data(), output.data() + output.size());
    }
    // Each chunk's select() and its check over the chunk's own rows, and the first chunk's count of
    // the rest of the prompt (listed and checked where a filter drops by id): each row read four
    // times at most, where every chunk counting the prompt's other rows read each 32 to 64 times.
    CHECK(read <= 4 * prompt_len);
    CHECK(state.size() == 0);

    seqpool::pooler<method::step, head::embed, seqpool::host_space> whole(space, hidden_size);
    seqpool::batch step{{test::whole("doc", task::token_embed, prompt_len, params)}};
    step.requests[0].prompt_token_ids = ids;
    const seqpool::step_plan plan = whole.plan(step, state);
    whole.reserve(plan, state);
    seqpool::buffer<float, seqpool::host_space> output(space, static_cast<std::size_t>(plan.output_size));
    whole.forward(seqpool::make_hidden_view(rows.data(), prompt_len, hidden_size), plan, state, output.span());
    CHECK(last == std::vector<float>(output.data(), output.data() + output.size()));
  }
}

TEST_CASE_TEMPLATE(
    "a share that votes for its common record allocates nothing in a plan that has held as many requests", Space,
    seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  const seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> mean(space, hidden_size);
  // Like requests, then as many whose first is odd: the second step's share
  // enters the odd one as the common record, then votes and enters every
  // record again (planner::enter_by_vote()), in the storage the first left.
  const prompts like(64, 3, task::embed);
  prompts odd(64, 3, task::embed);
  odd.step.requests.front().params.use_activation = false;
  seqpool::step_plan plan;
  mean.plan(like.step, state, plan);
  const std::int64_t before = allocations.load();
  mean.plan(odd.step, state, plan);
  CHECK(allocations.load() == before);
  CHECK(seqpool::detail::plan_access::program(plan).shares[0].records.details.size() == 1);
}

TEST_CASE_TEMPLATE("a plan made into one that has held as large a step allocates nothing", Space, seqpool::host_space,
                   seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::dispatcher<seqpool::configurable_table<Space>> engine(
      space,
      seqpool::pooler<method::any_sequence, head::embed, Space>(space, hidden_size,
                                                                *method::any_sequence::from_name("mean")),
      seqpool::pooler<method::any_sequence, head::classify, Space>(space, hidden_size,
                                                                   *method::any_sequence::from_name("max")),
      seqpool::pooler<method::any_token, head::embed, Space>(space, hidden_size, *method::any_token::from_name("all")),
      seqpool::pooler<method::any_token, head::classify, Space>(space, hidden_size,
                                                                *method::any_token::from_name("step")));
  std::vector<std::int64_t> ids(16, 1);
  for (std::size_t t = 0; t < ids.size(); t += 3) ids[t] = 7;
  const seqpool::pooling_params spans{.spans = {{0, 3}, {3, 8}}};
  const seqpool::pooling_params steps{.step_tag_id = 7, .returned_token_ids = {1, 2}, .drop_last = true};
  const seqpool::pooling_params filtered{.drop_first = true, .drop_token_ids = {7}};
  // Every task, chunked requests with ids longer than a string holds inline,
  // spans, kept columns and token filters, and requests of one row: the first
  // or the second half of round `round`'s prompts.
  const auto batch_of = [&](int round, bool second) {
    const std::string prefix = "a-request-id-longer-than-sixteen-" + std::to_string(round) + "-";
    const std::int64_t half = second ? 1 : 0;
    seqpool::batch step{{test::part(prefix + "e", task::embed, 8, 4 * half, 4, spans),
                         test::part(prefix + "c", task::classify, 6, 3 * half, 3),
                         test::part(prefix + "a", task::token_embed, 6, 3 * half, 3, filtered),
                         test::part(prefix + "s", task::token_classify, 16, 8 * half, 8, steps)}};
    step.requests[2].prompt_token_ids = ids;
    step.requests[3].prompt_token_ids = ids;
    for (int k = 0; k < 8; ++k) step.requests.push_back(test::whole(prefix + std::to_string(k), task::embed, 1));
    return step;
  };
  seqpool::step_plan plan;
  // Plans a step into `plan`, runs it, and returns the allocations planning made.
  const auto allocations_of = [&](const seqpool::batch& step) {
    const std::int64_t before = allocations.load();
    engine.plan(step, state, plan);
    const std::int64_t made = allocations.load() - before;
    engine.reserve(plan, state);
    const auto hidden =
        test::to_space(space, std::vector<float>(static_cast<std::size_t>(plan.num_rows * hidden_size), 1.0f));
    seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(plan.output_size));
    engine.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, hidden_size), plan, state, output.span());
    return made;
  };
  CHECK(allocations_of(batch_of(1, false)) > 0);
  allocations_of(batch_of(1, true));
  CHECK(allocations_of(batch_of(2, false)) == 0);
  CHECK(allocations_of(batch_of(2, true)) == 0);
  CHECK(state.size() == 0);
}

TEST_CASE_TEMPLATE("what planning works in keeps no view of the batch once plan() returns or refuses it", Space,
                   seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  Space space;
  const seqpool::state_store<Space> state(space);
  seqpool::pooler<method::step, head::embed, Space> steps(space, hidden_size);
  // A token method's decision holds the columns its request keeps, a view of the request's own.
  prompts tagged(4, 16, task::token_embed, {.step_tag_id = 7, .returned_token_ids = {0, 2}});
  seqpool::step_plan plan = steps.plan(tagged.step, state);
  CHECK(test::keeps_no_view_of_batch(seqpool::detail::plan_access::program(plan)));
  // Refused at its last request, once the others were decided.
  tagged.step.requests.back().params.returned_token_ids = {hidden_size};
  CHECK_THROWS_WITH_AS(steps.plan(tagged.step, state, plan),
                       "request 3 (id \"r3\"): returned_token_ids: column 8 is outside [0, 8)", seqpool::error);
  CHECK(test::keeps_no_view_of_batch(seqpool::detail::plan_access::program(plan)));
}
