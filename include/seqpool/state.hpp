// The chunked-prefill state of requests that span several steps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/allocation_cache.hpp>
#include <seqpool/error.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool {

template <memory_space Space, class Result, class... Units>
class step_runner;

/// One entry per request that arrives in chunks, keyed by id: how far the request
/// has come, and its state, floats in the space's memory for what its method
/// keeps (a running sum, a latched row, the rows seen so far). A request that
/// arrives whole never gets an entry. A state lives in memory of its own, never
/// in a view of a step's hidden states, so no step's buffer is read after that
/// step. A multi_pooler's parts each keep a request's state of their own, as
/// `part` 0, 1, ... of its `parts`: the calls that take them default to a
/// pooler's or a dispatcher's, part 0 of 1; those that take an id alone see
/// every part. A state continues only with a runner of as many parts, so that
/// a pooler cannot finish a multi_pooler's request and leave its other parts'
/// states behind.
template <memory_space Space>
class state_store {
 public:
  explicit state_store(Space& space) : cache_(space) {}
  state_store(const state_store&) = delete;
  state_store& operator=(const state_store&) = delete;

  ~state_store() {
    for (auto& [id, held] : entries_) give_back(held);
  }

  /// Throws seqpool::error unless the request's chunk continues what the store
  /// holds for its id (SPEC section 8), with the method, width, knobs and token
  /// ids it began with (`key`). `index` is the request's place in its batch.
  void check(std::size_t index, const request& r, const state_key& key, std::uint32_t part = 0,
             std::uint32_t parts = 1) const {
    if (entries_.empty() && r.num_computed == 0) return;  // the common step: nothing in progress to collide with
    check_held(index, r, key, part, parts);
  }

  /// Throws seqpool::error unless the store holds what a plan of `planned`'s chunk,
  /// whose state's key is `key`, was made against and reserved: as many tokens
  /// pooled, in a state begun for that task and prompt length with that key,
  /// whose chunks chose the rows `before` counts (token methods). A plan runs
  /// once; a state released and begun again since, or a first chunk's reserved
  /// again by another plan (a pooler that shares the store), is another state
  /// unless it was begun and continued alike.
  void check_current(std::size_t index, const request& planned, const state_key& key, std::uint32_t part = 0,
                     chosen_rows before = {}, std::uint32_t parts = 1) const {
    constexpr std::string_view rule = ": plan each step once, against the state it runs with";
    const auto found = entries_.find(held_at{planned.id, part});
    const bool held = found != entries_.end();
    if (held ? found->second.num_computed != planned.num_computed : planned.num_computed != 0)
      detail::fail_request(index, planned.id, "plan", "planned when the state held ", planned.num_computed,
                           " tokens, it holds ", held ? std::to_string(found->second.num_computed) : "none", rule);
    if (held && (found->second.task != planned.task || found->second.prompt_len != planned.prompt_len ||
                 !(found->second.key == key) || !(found->second.before == before) || found->second.parts != parts))
      detail::fail_request(index, planned.id, "plan",
                           "its state was begun again since: for another task or prompt length, with another method, "
                           "width, knobs or ids, or choosing other rows so far (released and begun anew, or reserved "
                           "again by a pooler that shares the store)",
                           rule);
  }

  /// Host call before a step: the state, `floats` floats, of a request that
  /// arrives in chunks, begun with `key`. Allocates (and the audit counts it)
  /// only when no cached allocation fits. A first chunk reserved again before it
  /// ran (planned anew, perhaps with other knobs) begins with what this call
  /// says. If it throws, every state is as it was (the cache may keep memory).
  /// `index` is the request's place in its batch; `before`, the rows a later
  /// chunk's plan found its chunks had chosen (check_current()). In a step's
  /// reserve(), it notes what it changes (begin_reservations()).
  float* reserve(std::size_t index, const request& r, std::size_t floats, const state_key& key, std::uint32_t part = 0,
                 chosen_rows before = {}, std::uint32_t parts = 1) {
    const auto found = entries_.find(held_at{r.id, part});
    const bool held = found != entries_.end();
    // A first chunk reserved again before it ran begins anew, whatever its state was begun with.
    if (r.num_computed > 0 || (held && found->second.num_computed > 0))
      check_current(index, r, key, part, before, parts);
    if (held && found->second.num_computed > 0) return found->second.data;
    // The state begun anew, in the memory held where it is large enough.
    const bool keeps_memory = held && found->second.floats >= floats;
    entry begun;
    begun.data = keeps_memory ? found->second.data : take(index, r, floats);
    begun.floats = keeps_memory ? found->second.floats : floats;
    bool noted = false;
    try {
      begin(begun, r, key, parts);  // copies the key: may allocate
      if (noting_) {
        notes_.push_back({nullptr, held, {}});
        noted = true;
      }
      const auto placed = held ? found : entries_.try_emplace(held_key{r.id, part}).first;
      parts_ = std::max(parts_, part + 1);
      // Nothing from here on throws.
      entry& place = placed->second;
      if (noted) {
        notes_.back().key = &placed->first;
        notes_.back().before = std::move(place);
      } else if (held && !keeps_memory)
        give_back(place);
      place = std::move(begun);
      return place.data;
    } catch (...) {
      if (noted) notes_.pop_back();
      if (!keeps_memory) give_back(begun);
      throw;
    }
  }

  /// Whether reserve() made room for at least `floats` floats of the request's state.
  bool holds(const request_id& id, std::size_t floats, std::uint32_t part = 0) const {
    const auto found = entries_.find(held_at{id, part});
    return found != entries_.end() && found->second.floats >= floats;
  }

  /// The request's state, which reserve() made.
  float* data(const request_id& id, std::uint32_t part = 0) const {
    const auto found = entries_.find(held_at{id, part});
    if (found == entries_.end())
      detail::fail("state", "no state is held for id ", detail::quoted(id.str()),
                   ": reserve() makes it for a chunked request");
    return found->second.data;
  }

  /// After a step's work is launched: the request has pooled its chunk, which
  /// chose the rows `chunk` counts (token methods; none for sequence methods).
  /// A finished request gives its state's memory back; later steps that reuse
  /// it are stream-ordered behind the work that reads it now.
  void advance(const request& r, std::uint32_t part = 0, chosen_rows chunk = {}) {
    const auto found = entries_.find(held_at{r.id, part});
    if (found == entries_.end()) return;
    if (r.num_computed + r.num_scheduled == r.prompt_len) {
      give_back(found->second);
      entries_.erase(found);
    } else {
      found->second.num_computed += r.num_scheduled;
      found->second.before.count += chunk.count;
      found->second.before.digest += chunk.digest;
    }
  }

  /// Token methods: the rows a request in progress has chosen in its chunks so
  /// far, and how many it will over its whole prompt (none where no state is held).
  held_rows rows_of(const request_id& id, std::uint32_t part = 0) const {
    const auto found = entries_.find(held_at{id, part});
    if (found == entries_.end()) return {};
    return {found->second.before, found->second.key.rows_total};
  }

  /// Drops a request that will not finish (aborted or preempted by the engine), every part's state of it.
  void release(const request_id& id) {
    for (std::uint32_t part = 0; part < parts_; ++part) {
      const auto found = entries_.find(held_at{id, part});
      if (found == entries_.end()) continue;
      give_back(found->second);
      entries_.erase(found);
    }
  }

  /// Whether any part holds a state of the request.
  bool contains(const request_id& id) const {
    for (std::uint32_t part = 0; part < parts_; ++part)
      if (entries_.find(held_at{id, part}) != entries_.end()) return true;
    return false;
  }

  /// Tokens pooled so far for a request in progress, 0 when none is held (every part's state has pooled as many).
  std::int64_t num_computed(const request_id& id) const {
    for (std::uint32_t part = 0; part < parts_; ++part)
      if (const auto found = entries_.find(held_at{id, part}); found != entries_.end())
        return found->second.num_computed;
    return 0;
  }

  /// The states held: one a request, or one a part of a multi_pooler's request.
  std::size_t size() const { return entries_.size(); }

  /// Whether it was made on `space`, where its states lie.
  bool belongs_to(const Space& space) const { return cache_.belongs_to(space); }

  /// Frees the memory of finished requests that is cached for reuse.
  void trim() { cache_.trim(); }

  std::size_t cached_allocations() const { return cache_.cached_allocations(); }

 private:
  /// check() where the store holds states or the chunk continues one.
  void check_held(std::size_t index, const request& r, const state_key& key, std::uint32_t part,
                  std::uint32_t parts) const {
    const auto found = entries_.find(held_at{r.id, part});
    const bool started = found != entries_.end() && found->second.num_computed > 0;
    if (r.num_computed == 0) {
      if (started)
        detail::fail_request(index, r.id, "num_computed", "0 restarts a request whose state holds ",
                             found->second.num_computed, " tokens; release() it first");
      return;
    }
    if (!started)
      detail::fail_request(index, r.id, "num_computed", r.num_computed,
                           " continues a request that has no state (its first chunk never ran, or it finished)");
    const entry& held = found->second;
    if (held.parts != parts)
      detail::fail_request(index, r.id, "state", "begun by ", runner_of(held.parts), ", it continues with ",
                           runner_of(parts), ": continue a request with the kind of runner that began it");
    if (held.num_computed != r.num_computed)
      detail::fail_request(index, r.id, "num_computed", r.num_computed, " disagrees with the state, which holds ",
                           held.num_computed, " tokens");
    if (held.task != r.task)
      detail::fail_request(index, r.id, "task", "continues as ", name(r.task), " but began as ", name(held.task));
    if (held.prompt_len != r.prompt_len)
      detail::fail_request(index, r.id, "prompt_len", r.prompt_len, " differs from ", held.prompt_len,
                           " given at the first chunk");
    const state_key& began = held.key;
    if (began.method != key.method)
      detail::fail_request(index, r.id, "method", key.method_name, " continues a state begun by ", began.method_name);
    if (began.hidden_size != key.hidden_size)
      detail::fail_request(index, r.id, "hidden_size", key.hidden_size, " continues a state begun with ",
                           began.hidden_size);
    if (r.params != began.params)
      detail::fail_request(index, r.id, "params", differing_knob(r.params, began.params),
                           " differs from the first chunk's");
    if (began.token_ids != key.token_ids)
      detail::fail_request(index, r.id, "prompt_token_ids", "differ from those of the first chunk");
  }

  struct entry {
    seqpool::task task = seqpool::task::embed;
    std::int64_t prompt_len = 0;
    state_key key;
    std::int64_t num_computed = 0;
    chosen_rows before;  ///< token methods: the rows its chunks so far chose
    std::uint32_t parts = 1;  ///< the parts of the runner that began it
    float* data = nullptr;
    std::size_t floats = 0;
  };

  /// An entry's key: the request's id and the part whose state it is.
  struct held_key {
    request_id id;
    std::uint32_t part = 0;
  };
  /// A key looked up without copying a request_id (text given as a string is made one first).
  struct held_at {
    const request_id& id;
    std::uint32_t part = 0;
  };
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(held_at key) const { return key.id.hash() ^ (std::size_t{key.part} * 0x9e3779b97f4a7c15u); }
    std::size_t operator()(const held_key& key) const { return (*this)(held_at{key.id, key.part}); }
  };
  struct key_equal {
    using is_transparent = void;
    static held_at at(const held_key& key) { return {key.id, key.part}; }
    static held_at at(held_at key) { return key; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return at(a).id == at(b).id && at(a).part == at(b).part;
    }
  };

  /// The request's chunks continue what its first chunk begins.
  static void begin(entry& held, const request& r, const state_key& key, std::uint32_t parts) {
    held.task = r.task;
    held.prompt_len = r.prompt_len;
    held.key = key;
    held.before = {};
    held.parts = parts;
  }

  /// How a message names a runner of `parts` parts.
  static std::string runner_of(std::uint32_t parts) {
    return parts == 1 ? "a pooler, a dispatcher or a multi_pooler of 1 part"
                      : detail::concat("a multi_pooler of ", parts, " parts");
  }

  void give_back(entry& held) noexcept {
    if (held.data != nullptr) cache_.give_back(held.data, held.floats * sizeof(float));
    held.data = nullptr;
    held.floats = 0;
  }

  /// `floats` floats for request `r`'s state (none for 0), or seqpool::error where they cannot be had.
  float* take(std::size_t index, const request& r, std::size_t floats) {
    if (floats == 0) return nullptr;
    const auto refused = [&] {
      return error(detail::concat(detail::request_named(index, r.id.str()), ": prompt_len: keeping ", r.prompt_len,
                                  " tokens' state needs ", floats, " floats, more than can be allocated"));
    };
    if (floats > std::numeric_limits<std::size_t>::max() / sizeof(float)) throw refused();
    try {
      return static_cast<float*>(cache_.take(floats * sizeof(float)));
    } catch (const std::bad_alloc&) {
      throw refused();
    }
  }

  // A step's reserve() (step_runner's) reserves its states all or none: between
  // begin_reservations() and keep_reservations() or undo_reservations(), each
  // reserve() notes the state it made or began anew, which the undo takes back.

  /// Opens a step's reservations, with room made for `count` notes before anything changes.
  void begin_reservations(std::size_t count) {
    notes_.clear();
    notes_.reserve(count);
    noting_ = true;
  }

  /// Closes the step's reservations as they are: the memory of each state they began anew elsewhere goes back.
  void keep_reservations() noexcept {
    for (note& change : notes_)
      if (change.held && change.before.data != entries_.find(held_at{change.key->id, change.key->part})->second.data)
        give_back(change.before);
    close_reservations();
  }

  /// Closes the step's reservations undone, last first: a state they made is
  /// removed and its memory goes back, one they began anew gets back what it
  /// held. The store is as it was before them (its cache may keep memory).
  void undo_reservations() noexcept {
    for (auto change = notes_.rbegin(); change != notes_.rend(); ++change) {
      const auto found = entries_.find(held_at{change->key->id, change->key->part});
      if (found->second.data != change->before.data) give_back(found->second);
      if (change->held)
        found->second = std::move(change->before);
      else
        entries_.erase(found);
    }
    close_reservations();
  }

  void close_reservations() noexcept {
    notes_.clear();
    noting_ = false;
  }

  /// What a reserve() between begin_reservations() and its close changed: the
  /// state under `*key` (the map's own, which stays in place) it made, or the
  /// one it began anew (`held`), which was `before`.
  struct note {
    const held_key* key;
    bool held;
    entry before;
  };

  template <memory_space, class, class...>
  friend class step_runner;

  detail::allocation_cache<Space> cache_;
  std::unordered_map<held_key, entry, key_hash, key_equal> entries_;
  std::uint32_t parts_ = 1;  ///< 1 + the highest part a state was reserved for
  std::vector<note> notes_;
  bool noting_ = false;
};

}  // namespace seqpool
