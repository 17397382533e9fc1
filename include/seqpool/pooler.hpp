// pooler<Method, Head, Space>: one pooling method and one head in one memory space.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/check_forward.hpp>
#include <seqpool/detail/device/apply_linear.hpp>
#include <seqpool/detail/device/gather_rows.hpp>
#include <seqpool/detail/device/policy.hpp>
#include <seqpool/detail/device/pool_rows.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/host/apply_linear.hpp>
#include <seqpool/detail/host/combine_partials.hpp>
#include <seqpool/detail/host/gather_rows.hpp>
#include <seqpool/detail/host/policy.hpp>
#include <seqpool/detail/host/reduce_tiles.hpp>
#include <seqpool/detail/host/store_row.hpp>
#include <seqpool/detail/plan_builder.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state.hpp>

namespace seqpool {

namespace detail {

/// A serial number per pooler, which its plans carry.
inline std::uint64_t next_pooler_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

/// The launch policy of the algorithms a space runs.
template <class Space>
using policy_of =
    std::conditional_t<Space::layer == layer::host, detail::host::launch_policy, detail::device::launch_policy>;

}  // namespace detail

/// Pools a group of requests that share one task in two phases. plan() runs on
/// the host, checks every request and fixes every size, offset and index of the
/// step. forward() uploads the plan's one index block and launches work whose
/// shapes the plan fixed: it never reads the device back, never waits and never
/// allocates; reserve() makes the room it needs beforehand.
///
///     auto plan = pooler.plan(batch, state);
///     pooler.reserve(plan, state);               // outside the step: may allocate or wait
///     pooler.forward(hidden, plan, state, out);  // the step
///     // plan.results[i]: where request i's result lies in `out`, if it finished
///
/// Given a capacity, a step on a device space can also be captured into a CUDA
/// graph once and replayed for every batch that fits (capture(), restage()).
///
/// Results are float, or, with Result = half or bfloat16 (seqpool's or CUDA's),
/// 16-bit: methods and heads still work in float, and each value is rounded to
/// nearest even once, as it is stored.
template <class Method, pooling_head Head, memory_space Space, result_element Result = float>
class pooler {
  static_assert(detail::method_is_complete<Method>());
  using policy = detail::policy_of<Space>;

 public:
  using method_type = Method;
  using head_type = Head;
  using space_type = Space;
  using result_type = Result;

  static constexpr bool token_wise = Method::kind == method_kind::token;
  static constexpr seqpool::task task = task_of(token_wise, Head::kind);

  pooler(Space& space, std::int64_t hidden_size, Method method = {}, Head head = {})
      : space_(&space),
        hidden_size_(hidden_size),
        method_(std::move(method)),
        head_(head),
        workspace_(space, 0),
        arrivals_(space, 0) {
    // Records hold widths in 32 bits.
    if (hidden_size < 1 || hidden_size > std::numeric_limits<std::int32_t>::max())
      detail::fail("hidden_size", "must be in [1, 2147483647], got ", hidden_size);
  }

  std::int64_t hidden_size() const { return hidden_size_; }
  const Method& method() const { return method_; }
  const Head& head() const { return head_; }

  /// Plans a batch whose requests all have this pooler's task.
  step_plan plan(const batch& step, const state_store<Space>& state) const {
    const step_layout layout = lay_out(step);
    detail::check_served(
        step, layout, [](seqpool::task wanted) { return wanted == task; }, " here (this one serves ", name(task), ")");
    if (capacity_) detail::check_rows_fit(*capacity_, layout.num_rows);
    std::vector<std::size_t> everyone(step.requests.size());
    for (std::size_t i = 0; i < everyone.size(); ++i) everyone[i] = i;
    step_plan planned = plan(step, chunks_in_step(layout), everyone, state, 0, detail::ids_checked);
    planned.num_rows = layout.num_rows;  // padded: the last sequence's padding is part of the hidden states too
    return planned;
  }

  /// Plans the requests `chosen` of a batch (indices, in batch order), whose
  /// chunks count rows from the start of the hidden states the launch will read,
  /// with results from `output_begin` (a multiple of 4) of the step's output: how
  /// a dispatcher gives one pooler every group of its task at once.
  step_plan plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen,
                 const state_store<Space>& state, std::int64_t output_begin = 0) const {
    detail::check_unique_ids(step.requests, chosen.size(), [&](std::size_t k) { return chosen[k]; });
    return plan(step, chunks, chosen, state, output_begin, detail::ids_checked);
  }

  /// The same, for a caller that has checked the chosen requests' ids are unique
  /// (lay_out() checks a whole batch).
  step_plan plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen,
                 const state_store<Space>& state, std::int64_t output_begin, detail::ids_checked_t) const {
    detail::plan_builder<policy> builder(hidden_size_, head_.linear().present(), chosen.size(), output_begin,
                                         sizeof(Result));
    with_method([&]<class M>(const M& method) {
      std::vector<std::int64_t> positions;
      for (const std::size_t index : chosen) {
        const request& r = step.requests[index];
        const chunk& part = chunks[index];
        const state_key key = part.partial() ? key_of<M>(r) : state_key{};
        state.check(index, r, key);
        if constexpr (token_wise) {
          plan_tokens(method, builder, index, r, part, positions, key);
        } else if (r.params.spans.empty()) {
          builder.add_pooled(index, r, part, method.window(part), method.keeps_state,
                             head_.output_width(index, r, hidden_size_), key);
        } else {
          if (capacity_)
            detail::fail_request(index, r.id, "spans",
                                 "a pooler with a capacity (a captured step) does not pool spans");
          builder.add_spans(
              index, r, part, [&](const chunk& seen) { return method.window(seen); }, method.keeps_state,
              head_.output_width(index, r, hidden_size_), key);
        }
      }
    });
    std::int64_t num_rows = 0;
    for (const std::size_t index : chosen)
      num_rows = std::max(num_rows, chunks[index].row_begin + chunks[index].num_scheduled);
    step_plan planned = std::move(builder).build(num_rows);
    planned.maker = id_;
    planned.hidden_size = hidden_size_;
    if (capacity_) check_fits(planned);
    return planned;
  }

  /// Outside the step: state blocks for chunked requests, room for the upload,
  /// the workspace and the arrival counters. Everything it allocates, and any
  /// wait for a staging slot still being copied from, the audit counts.
  void reserve(const step_plan& plan, state_store<Space>& state) {
    check_maker(plan);
    for (const detail::state_use& use : plan.stateful) state.reserve(use.batch_index, use.owner, use.floats, use.key);
    space_->reserve_upload(plan.block.bytes);
    grow(plan.workspace_floats, plan.arrivals);
  }

  /// The step: checks the shapes and that reserve() made room, uploads the index
  /// block, launches, and moves chunked requests on in the state. `output` must
  /// hold plan.output_size values. Inside a stream capture, use capture().
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state,
               cuda::std::span<Result> output) {
    detail::check_forward(hidden, hidden_size_, plan.num_rows, plan.output_size, output);
    if (space_->capturing())
      detail::fail("forward", "the stream is being captured: a captured step goes through capture() and a graph_upload");
    check_reserved(plan, state);
    if (!plan.block.records.requests.empty()) {
      const std::span<std::byte> staged = space_->stage(plan.block.bytes);
      encode(plan, state, staged);
      launch(hidden, &plan, space_->upload(staged), output);
    }
    advance(plan, state);
  }

  // Capacity and capture.

  /// Fixes the largest step this pooler takes and makes room for it outside any
  /// step, so that a captured step's memory never moves. plan() then refuses a
  /// batch that does not fit.
  void reserve_capacity(const capacity& limits) {
    detail::check_capacity(limits);
    capacity_ = limits;
    bounds_ = detail::plan_builder<policy>::bounds(limits, hidden_size_, widest_result(), token_wise,
                                                   head_.linear().present(), sizeof(Result));
    grow(bounds_.workspace_floats, bounds_.arrivals);
  }

  /// The values an output must hold for any step within the capacity.
  std::int64_t output_capacity() const {
    require_capacity("output_capacity");
    return bounds_.output_per_request * capacity_->requests + bounds_.output_per_result_row * capacity_->result_rows;
  }

  /// Outside any capture: the staging one captured step needs (device spaces).
  auto reserve_graph() requires(Space::layer == layer::device) {
    require_capacity("reserve_graph");
    return space_->reserve_graph(bounds_.block_bytes);
  }

  /// Records the step into the stream capture in progress, sized by the
  /// capacity, its index block uploaded from `home`. The graph reads `hidden`
  /// (capacity.rows rows) and writes `output` (output_capacity() values) at every
  /// replay: they, `home`, this pooler and the state store must outlive it.
  /// Launch the graph, then call home.mark_launched(); each later step is
  /// restage() and the same.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state, cuda::std::span<Result> output,
               Upload& home) {
    require_capacity("capture");
    detail::check_captured_views(hidden, hidden_size_, capacity_->rows, output_capacity(), output);
    check_fits(plan);
    check_reserved(plan, state);
    const std::span<std::byte> staged = space_->stage(home);
    encode(plan, state, staged);
    launch(hidden, nullptr, space_->upload(home), output);
    advance(plan, state);
  }

  /// Between replays of a captured step: writes the next step's plan into the
  /// graph's slot (once the last replay has read it) and moves chunked requests
  /// on. Then launch the graph and call home.mark_launched(). The hidden states
  /// of the step go into the first plan.num_rows rows of the captured buffer.
  template <class Upload>
  void restage(const step_plan& plan, state_store<Space>& state, Upload& home) {
    require_capacity("restage");
    check_fits(plan);
    check_reserved(plan, state);
    encode(plan, state, space_->restage(home));
    advance(plan, state);
  }

  // The pieces of a step, for a dispatcher that shares one upload among poolers.

  /// Throws seqpool::error, before anything is queued, unless reserve() made
  /// the room the plan needs: its state blocks, workspace and arrival counters.
  void check_reserved(const step_plan& plan, const state_store<Space>& state) const {
    check_maker(plan);
    if (std::cmp_less(workspace_.size(), plan.workspace_floats) || std::cmp_less(arrivals_.size(), plan.arrivals))
      detail::fail("reserve", "the step needs workspace that reserve() did not make: call reserve() with this "
                              "step's plan before forward()");
    for (const detail::state_use& use : plan.stateful) {
      state.check_current(use.batch_index, use.owner);
      if (!state.holds(use.owner.id, use.floats))
        detail::fail_request(use.batch_index, use.owner.id, "state",
                             "no state block was reserved for it: call reserve() with this step's plan before "
                             "forward()");
    }
  }

  /// Writes the plan's index block, with this step's state blocks, into `block` on the host.
  void encode(const step_plan& plan, const state_store<Space>& state, std::span<std::byte> block) const {
    plan.block.write(block.data());
    float** state_table = plan.block.at.state_table.in(block.data());
    for (const detail::state_use& use : plan.stateful)
      for (std::int32_t k = 0; k < use.records; ++k)
        state_table[use.request + k] = state.data(use.owner.id) + k * use.record_floats;
  }

  /// Launches the plan's work over an index block already on the device, writing
  /// into the step's whole `output` at the offsets the plan recorded. Without a
  /// plan (a captured step), every launch is sized by the capacity.
  template <hidden_element T>
  void launch(hidden_view<T> hidden, const step_plan* plan, const std::byte* block, cuda::std::span<Result> output) {
    const detail::record_counts counts = plan != nullptr ? plan->block.records.counts() : bounds_.records;
    if constexpr (Space::layer == layer::host)
      launch_host(hidden, *plan, counts, block, output);
    else
      launch_device(hidden, counts, block, output);
  }

  /// After launching: chunked requests have pooled this step's tokens.
  void advance(const step_plan& plan, state_store<Space>& state) const {
    for (const detail::state_use& use : plan.stateful) state.advance(use.owner);
  }

  /// The capacity's most records and block bytes (zero without a capacity).
  const detail::plan_bounds& bounds() const { return bounds_; }

 private:
  /// Calls `work` with the method as its concrete type, visiting a runtime choice on the host.
  template <class Work>
  void with_method(Work&& work) const {
    if constexpr (detail::is_runtime_method<Method>)
      method_.visit(work);
    else
      work(method_);
  }

  /// A plan's records are sized for the pooler that made it: any other would
  /// read and write past them.
  void check_maker(const step_plan& plan) const {
    if (plan.maker != id_)
      detail::fail("plan", "it was made by another pooler (hidden_size ", plan.hidden_size,
                   "); plan the step with the pooler that runs it");
  }

  /// What a chunked request's state is begun with under method M.
  template <class M>
  state_key key_of(const request& r) const {
    std::string_view name = "a user method";
    if constexpr (requires { M::name; }) name = M::name;
    std::uint64_t ids = 0;
    if constexpr (token_wise) {
      if constexpr (M::reads_token_ids)
        ids = detail::hash_ids(r.prompt_token_ids.first(
            std::min(r.prompt_token_ids.size(), static_cast<std::size_t>(r.prompt_len))));
    }
    return {&detail::method_tag<M>, name, hidden_size_, r.params, ids};
  }

  std::int64_t widest_result() const {
    return std::max(hidden_size_, head_.linear().present() ? head_.linear().out_features : 0);
  }

  void require_capacity(const char* call) const {
    if (!capacity_) detail::fail(call, "needs a capacity: call reserve_capacity() first");
  }

  /// A plan within the capacity stays within what reserve_capacity() sized, so
  /// a captured step's launches and memory cover it.
  void check_fits(const step_plan& plan) const {
    const capacity& limits = *capacity_;
    detail::check_limit("requests", static_cast<std::int64_t>(plan.results.size()), limits.requests);
    detail::check_rows_fit(limits, plan.num_rows);
    detail::check_limit("result_rows", token_wise ? plan.result_rows : 0, limits.result_rows);
    detail::check_limit("columns", static_cast<std::int64_t>(plan.block.records.column_table.size()), limits.columns);
    const detail::record_counts counts = plan.block.records.counts();
    const bool within = counts.tiles <= bounds_.records.tiles && counts.works <= bounds_.records.works &&
                        counts.gathers <= bounds_.records.gathers && counts.linears <= bounds_.records.linears &&
                        plan.block.bytes <= bounds_.block_bytes && plan.workspace_floats <= bounds_.workspace_floats &&
                        plan.arrivals <= bounds_.arrivals;
    if (!within) detail::fail("capacity", "the step's records exceed what the capacity was sized for");
  }

  void grow(std::int64_t workspace_floats, std::int64_t arrivals) {
    if (std::cmp_less(workspace_.size(), workspace_floats))
      workspace_ = buffer<float, Space>(*space_, static_cast<std::size_t>(workspace_floats));
    if (std::cmp_less(arrivals_.size(), arrivals)) {
      arrivals_ = buffer<int, Space>(*space_, static_cast<std::size_t>(arrivals));
      space_->zero(arrivals_.data(), arrivals_.size() * sizeof(int));  // the last block to arrive resets its counter
    }
  }

  template <class TokenMethod>
  void plan_tokens(const TokenMethod& method, detail::plan_builder<policy>& builder, std::size_t index,
                   const request& r, const chunk& part, std::vector<std::int64_t>& chosen,
                   const state_key& key) const {
    method.check(index, r, hidden_size_);
    if (!r.params.spans.empty())
      detail::fail_request(index, r.id, "spans", "only sequence methods pool spans; a token method returns rows");
    if (TokenMethod::reads_token_ids && std::cmp_less(r.prompt_token_ids.size(), r.prompt_len))
      detail::fail_request(index, r.id, "prompt_token_ids", "the method reads all ", r.prompt_len,
                           " ids of the prompt, got ", r.prompt_token_ids.size());
    const std::span<const std::int64_t> columns = method.columns(r);
    const std::int64_t width = columns.empty() ? hidden_size_ : static_cast<std::int64_t>(columns.size());
    const std::int64_t out_width = head_.output_width(index, r, width);
    const std::int64_t end = part.num_computed + part.num_scheduled;
    chosen.clear();
    method.select(r, part.num_computed, end, chosen);
    check_selection(method, index, r, part.num_computed, end, chosen);
    const std::int64_t rows_before = part.first_chunk() ? 0 : method.count(r, 0, part.num_computed);
    const std::int64_t rows_through = rows_before + static_cast<std::int64_t>(chosen.size());
    const std::int64_t rows_total = part.finished() ? rows_through : rows_through + method.count(r, end, r.prompt_len);
    builder.add_gathered(index, r, part, rows_before, chosen, rows_total, columns, out_width, key);
  }

  /// A token method's select() must choose positions of [begin, end) in
  /// ascending order, and its count() agree with it: the gathers and the state
  /// are sized from them.
  template <class TokenMethod>
  static void check_selection(const TokenMethod& method, std::size_t index, const request& r, std::int64_t begin,
                              std::int64_t end, std::span<const std::int64_t> chosen) {
    std::string_view name = "the method";
    if constexpr (requires { TokenMethod::name; }) name = TokenMethod::name;
    std::int64_t previous = begin - 1;
    for (const std::int64_t position : chosen) {
      if (position <= previous || position >= end)
        detail::fail_request(index, r.id, "method", name, "'s select() chose position ", position, ", outside [",
                             begin, ", ", end, ") or out of order");
      previous = position;
    }
    const std::int64_t counted = method.count(r, begin, end);
    if (std::cmp_not_equal(counted, chosen.size()))
      detail::fail_request(index, r.id, "method", name, "'s count() says ", counted, " rows in [", begin, ", ", end,
                           "), select() chose ", chosen.size());
  }

  /// The host algorithms: a pass of items over whole rows for each kind of record.
  template <hidden_element T>
  void launch_host(hidden_view<T> hidden, const step_plan& plan, const detail::record_counts& counts,
                   const std::byte* block, cuda::std::span<Result> output) {
    const detail::plan_sections& at = plan.block.at;
    const detail::step_memory<Result> memory{output.data(), workspace_.data(), at.state_table.in(block)};
    const detail::request_record* requests = at.requests.in(block);
    const bool stream_results =
        static_cast<std::size_t>(plan.output_size) * sizeof(Result) >= detail::host::streamed_output_bytes;
    with_method([&]<class M>(const M& method) {
      if constexpr (token_wise) {
        if (counts.gathers > 0)
          space_->launch(
              static_cast<std::int64_t>(counts.gathers),
              detail::host::gather_rows<Head, T, Result>{
                  head_, head_.linear(), hidden.data_handle(), hidden.stride(0), at.gathers.in(block), requests,
                  at.column_table.in(block), memory, static_cast<std::int64_t>(counts.gathers), stream_results});
      } else {
        if (counts.tiles > 0)
          space_->launch(static_cast<std::int64_t>(counts.tiles),
                         detail::host::reduce_tiles<M, Head, T, Result>{
                             method, head_, head_.linear(), hidden.data_handle(), hidden.stride(0), at.tiles.in(block),
                             requests, memory, static_cast<std::int64_t>(counts.tiles), stream_results});
        if (counts.combines > 0)
          space_->launch(static_cast<std::int64_t>(counts.combines),
                         detail::host::combine_partials<M, Head, Result>{method, head_, head_.linear(),
                                                                         at.combines.in(block), requests, memory});
      }
    });
    if (counts.linears > 0)
      space_->launch(
          static_cast<std::int64_t>(counts.linears),
          detail::host::apply_linear<Head, Result>{head_, head_.linear(), at.linears.in(block), requests, memory});
  }

  /// The device kernels: one pooling or gathering launch, and one of the linear
  /// layer where the head has one; each sized by `counts`, none when it has no
  /// blocks.
  template <hidden_element T>
  void launch_device(hidden_view<T> hidden, const detail::record_counts& counts, const std::byte* block,
                     cuda::std::span<Result> output) {
    using detail::device::launch_policy;
    const T* rows = hidden.data_handle();
    const bool rows_aligned =
        detail::device::is_aligned(rows) && hidden.stride(0) * static_cast<std::int64_t>(sizeof(T)) % 16 == 0;
    with_method([&]<class M>(const M& method) {
      if constexpr (token_wise) {
        const auto blocks = static_cast<std::int64_t>((counts.gathers + launch_policy::gathers_per_block - 1) /
                                                      launch_policy::gathers_per_block);
        if (blocks > 0)
          space_->launch(
              blocks, detail::device::gather_rows<Head, T, Result>{head_, rows, hidden.stride(0), rows_aligned, block,
                                                                   output.data(), workspace_.data()});
      } else if (counts.works > 0) {
        space_->launch(
            static_cast<std::int64_t>(counts.works),
            detail::device::pool_rows<M, Head, T, Result>{method, head_, rows, hidden.stride(0), rows_aligned, block,
                                                          output.data(), workspace_.data(), arrivals_.data()});
      }
    });
    if (!head_.linear().present() || counts.linears == 0) return;
    using linear_kernel = detail::device::apply_linear<Head, Result>;
    const std::int64_t per_block = linear_kernel::rows_per_block(head_.linear().in_features);
    space_->launch((static_cast<std::int64_t>(counts.linears) + per_block - 1) / per_block,
                   linear_kernel{head_, head_.linear(), block, output.data(), workspace_.data()});
  }

  Space* space_;
  std::int64_t hidden_size_;
  Method method_;
  Head head_;
  buffer<float, Space> workspace_;
  buffer<int, Space> arrivals_;
  std::optional<capacity> capacity_;
  detail::plan_bounds bounds_;
  std::uint64_t id_ = detail::next_pooler_id();
};

}  // namespace seqpool
