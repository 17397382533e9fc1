// device_space<Backend>: pooling in device memory, with one staged upload a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/detail/device/copy_pieces.hpp>
#include <seqpool/detail/device/policy.hpp>
#include <seqpool/error.hpp>
#include <seqpool/space/audit.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/space/omp_backend.hpp>
#if defined(__CUDACC__)
#include <seqpool/space/cuda_backend.hpp>
#endif

namespace seqpool {

template <class Backend>
class device_space;

/// A device backend whose kernels are cut by Policy instead of the default
/// launch policy: how the sweep runs the candidate policies
/// (detail/device/policy.hpp), and how a caller pins one a sweep chose.
template <class Backend, class Policy>
struct with_policy : Backend {
  using launch_policy = Policy;
  using Backend::Backend;
};

/// Where a captured step's image lives: a pinned staging slot and device memory
/// at fixed addresses, which the graph's upload and kernels read at every
/// replay. The slot starts with a list of the image's pieces the step uses
/// (each of the runner's regions, up to what its batch wrote), and the graph's
/// upload is a kernel that reads the list and copies those pieces: a replay
/// moves what its batch uses, not the whole capacity (or, where the launch
/// policy says so, one copy of the whole image: launch_policy::
/// captured_upload_in_pieces). A pooler's or
/// dispatcher's reserve_graph() makes one for its capacity, and only that
/// pooler or dispatcher captures and restages with it; it must outlive every
/// graph captured with it, and serves one graph.
///
///     capture() (during stream capture) → launch the graph → mark_launched()
///     restage() (plans the next batch into the slot) → launch the graph → mark_launched() …
template <class Backend>
class graph_upload {
 public:
  /// A part of the image that each launch copies.
  using piece = detail::device::image_piece;

  graph_upload(graph_upload&& other) noexcept
      : space_(std::exchange(other.space_, nullptr)),
        host_(other.host_),
        device_(other.device_),
        bytes_(other.bytes_),
        pieces_(other.pieces_),
        owner_(other.owner_),
        copied_(other.copied_),
        phase_(other.phase_) {}
  graph_upload& operator=(graph_upload&&) = delete;
  graph_upload(const graph_upload&) = delete;
  graph_upload& operator=(const graph_upload&) = delete;

  ~graph_upload() {
    if (space_ != nullptr) space_->release(*this);
  }

  /// The image's bytes: the most one launch copies.
  std::size_t bytes() const { return bytes_; }

  /// The serial number of the pooler or dispatcher it was made for.
  std::uint64_t owner() const { return owner_; }

  /// Call after each launch of the graph, on the space's stream and outside any
  /// capture: records when the launch has read the slot, so that the next
  /// restage() rewrites it only then.
  void mark_launched() {
    if (space_ == nullptr)
      detail::fail("mark_launched", "the graph_upload was moved from: call it on the one it moved into");
    if (phase_ != phase::staged)
      detail::fail("mark_launched", "nothing was staged for the graph since its last launch");
    if (space_->capturing()) detail::fail("mark_launched", "call it after launching the graph, outside stream capture");
    space_->backend_.record(copied_);
    phase_ = phase::launched;
  }

 private:
  friend class device_space<Backend>;

  /// fresh → listed (stage() during the capture) → staged (the upload recorded,
  /// or restage()) → launched (mark_launched()) → staged → …
  enum class phase { fresh, listed, staged, launched };

  graph_upload(device_space<Backend>& space, std::byte* host, std::byte* device, std::size_t bytes, int pieces,
               std::uint64_t owner, typename Backend::event copied)
      : space_(&space), host_(host), device_(device), bytes_(bytes), pieces_(pieces), owner_(owner), copied_(copied) {}

  /// The slot: the list of pieces, then the image.
  std::size_t slot_bytes() const { return pieces_ * sizeof(piece) + bytes_; }
  std::byte* staged_image() const { return host_ + pieces_ * sizeof(piece); }

  device_space<Backend>* space_;
  std::byte* host_;
  std::byte* device_;
  std::size_t bytes_;
  int pieces_;
  std::uint64_t owner_;
  typename Backend::event copied_;
  phase phase_ = phase::fresh;
};

/// A staging slot that reserve_upload() set aside for the next eager step of
/// one pooler or dispatcher; the step's upload() hands it back to the ring
/// once the copy from it is queued. While held it is settled (no copy reads
/// it) and no other reservation gets it; a reservation dropped unused gives it
/// back as it was. It must not outlive its space.
template <class Backend>
class upload_reservation {
 public:
  upload_reservation() = default;
  upload_reservation(upload_reservation&& other) noexcept
      : space_(std::exchange(other.space_, nullptr)), slot_(other.slot_) {}
  upload_reservation& operator=(upload_reservation&& other) noexcept {
    if (this != &other) {
      drop();
      space_ = std::exchange(other.space_, nullptr);
      slot_ = other.slot_;
    }
    return *this;
  }
  upload_reservation(const upload_reservation&) = delete;
  upload_reservation& operator=(const upload_reservation&) = delete;
  ~upload_reservation() { drop(); }

  /// Whether it holds a slot: from reserve_upload() until the upload from it,
  /// or until it is dropped.
  bool held() const { return space_ != nullptr; }

 private:
  friend class device_space<Backend>;

  void drop() noexcept {
    if (space_ != nullptr) std::exchange(space_, nullptr)->ring_[slot_].held = false;
  }

  device_space<Backend>* space_ = nullptr;
  std::size_t slot_ = 0;
};

/// Device memory and device work through a Backend (cuda_backend under nvcc,
/// omp_backend as the stand-in under g++). The backend is part of the type, so
/// a CUDA and an OpenMP translation unit can link into one binary without
/// sharing a definition.
///
/// An eager step's image goes up as one copy from a ring of pinned staging
/// slots. A slot may be rewritten only once the copy from it has completed; the
/// step itself never asks (an event query is illegal during capture and costs a
/// driver call): reserve_upload(), outside the step, settles a slot and sets it
/// aside in the caller's upload_reservation, and stage() takes only a slot so
/// held. Poolers that share the space may each reserve before any of them
/// forwards, as many as the ring has slots.
template <class Backend>
class device_space {
 public:
  using backend_type = Backend;
  using upload_reservation = seqpool::upload_reservation<Backend>;
  static constexpr algorithm_family family = algorithm_family::device;

  explicit device_space(Backend backend = Backend{},
                        std::size_t staging_slots = detail::device::staging_policy::slots)
      : backend_(std::move(backend)), ring_(staging_slots) {
    if (staging_slots == 0) detail::fail("staging_slots", "the staging ring needs at least one slot");
    for (staging_slot& slot : ring_) slot.copied = backend_.create_event();
  }

  device_space(const device_space&) = delete;
  device_space& operator=(const device_space&) = delete;

  ~device_space() {
    for (staging_slot& slot : ring_) {
      if (slot.host != nullptr) backend_.deallocate_pinned(slot.host, slot.capacity);
      backend_.destroy_event(slot.copied);
    }
    if (device_image_ != nullptr) backend_.deallocate(device_image_, device_capacity_);
  }

  /// The backend, e.g. for the stream that work is queued on, or to capture it.
  const Backend& backend() const { return backend_; }
  Backend& backend() { return backend_; }

  void* allocate_bytes(std::size_t bytes) {
    audit_.count_allocation();
    return backend_.allocate(bytes);
  }

  void deallocate_bytes(void* memory, std::size_t bytes) noexcept {
    audit_.count_allocation();
    backend_.deallocate(memory, bytes);
  }

  /// Sets `bytes` of device memory to zero, in stream order.
  void zero(void* memory, std::size_t bytes) {
    if (bytes > 0) backend_.zero(memory, bytes);
  }

  /// Outside a step: grows every staging slot and the device's image to
  /// `bytes`, and, unless `reservation` holds a slot already, sets aside the
  /// next slot in ring order that none holds, waiting (and counting the wait)
  /// only if the copy from it, about `staging_slots` steps ago, is still pending.
  void reserve_upload(std::size_t bytes, upload_reservation& reservation) {
    refuse_in_capture("reserve");
    if (reservation.held() && reservation.space_ != this)
      detail::fail("reserve", "the upload_reservation holds a slot of another space");
    for (staging_slot& slot : ring_) grow(slot, bytes);
    if (device_capacity_ < bytes) {
      if (device_image_ != nullptr) deallocate_bytes(device_image_, device_capacity_);
      device_image_ = nullptr;  // stream-ordered free: earlier work that reads it is done first
      device_image_ = static_cast<std::byte*>(allocate_bytes(bytes));
      device_capacity_ = bytes;
    }
    if (reservation.held()) return;
    std::size_t free = next_;
    while (ring_[free].held) {
      free = (free + 1) % ring_.size();
      if (free == next_)
        detail::fail("reserve", "each of the ", ring_.size(),
                     " staging slots is held by a pooler or dispatcher that reserved a step it has not forwarded: "
                     "a space serves at most that many at once (device_space's staging_slots)");
    }
    settle(ring_[free]);
    ring_[free].held = true;
    reservation.space_ = this;
    reservation.slot_ = free;
    next_ = (free + 1) % ring_.size();
  }

  /// The staging slot this step writes its image into, which reserve_upload()
  /// set aside in `reservation`.
  std::span<std::byte> stage(const upload_reservation& reservation, std::size_t bytes) {
    if (reservation.space_ != this || ring_[reservation.slot_].capacity < bytes || device_capacity_ < bytes)
      detail::fail("reserve", "the step needs ", bytes,
                   " bytes of staging that reserve() did not make ready: call reserve() with this step's plan before "
                   "every forward()");
    const staging_slot& slot = ring_[reservation.slot_];
    return {slot.host, bytes};
  }

  /// The step's one upload: an asynchronous copy of the image just staged in
  /// `reservation`'s slot, which goes back to the ring.
  const std::byte* upload(upload_reservation& reservation, std::span<const std::byte> staged) {
    if (reservation.space_ != this || staged.data() != ring_[reservation.slot_].host ||
        staged.size() > ring_[reservation.slot_].capacity || staged.size() > device_capacity_)
      detail::fail("upload", "the image was not staged in the reservation's slot by stage()");
    staging_slot& slot = ring_[reservation.slot_];
    audit_.count_upload(staged.size());
    backend_.copy_to_device(device_image_, staged.data(), staged.size());
    backend_.record(slot.copied);
    slot.in_flight = true;
    slot.held = false;
    reservation.space_ = nullptr;
    return device_image_;
  }

  /// Queues `kernel` on `blocks` blocks; the audit counts the launch.
  template <class Kernel>
  void launch(std::int64_t blocks, const Kernel& kernel) {
    audit_.count_launch();
    backend_.launch(blocks, kernel);
  }

  /// Whether a step puts each of its entries' launches on a branch of the
  /// stream of its own: the launch policy's choice (entries_on_branches).
  static constexpr bool entries_on_branches = detail::device::policy_of<Backend>::type::entries_on_branches;

  /// Whether a captured step's upload copies the pieces its batch uses, or the
  /// capacity's whole image: the launch policy's choice (captured_upload_in_pieces).
  static constexpr bool uploads_in_pieces = detail::device::policy_of<Backend>::type::captured_upload_in_pieces;

  /// Outside a step: room for a step's work on `count` branches (on CUDA a
  /// stream and an event a branch, made once).
  void reserve_branches(int count) {
    refuse_in_capture("reserve");
    backend_.reserve_branches(count);
  }

  /// Work queued from here on goes on branch 0 (the stream itself) or another
  /// of `count` branches, as select_branch() says, each after all that was
  /// queued before; join_branches() orders the stream after them all. An
  /// event and a wait on it a branch, no host wait: legal in a step and in a
  /// capture, where they are the graph's edges.
  void fork_branches(int count) { backend_.fork_branches(count); }
  void select_branch(int branch) { backend_.select_branch(branch); }
  void join_branches() { backend_.join_branches(); }

  /// Whether the stream is being captured into a graph.
  bool capturing() const { return backend_.is_capturing(); }

  /// Throws seqpool::error, naming `call`, while the stream is being captured:
  /// what may wait, allocate or query an event runs outside a capture.
  void refuse_in_capture(const char* call) const {
    if (capturing()) detail::fail(call, "must run outside stream capture (it may wait, allocate or query an event)");
  }

  /// Outside any capture: a pinned slot and device memory for an image of
  /// `bytes` in `pieces` parts, for one captured step of the pooler or
  /// dispatcher `owner` (see graph_upload). The audit counts both allocations.
  graph_upload<Backend> reserve_graph(std::size_t bytes, int pieces, std::uint64_t owner) {
    refuse_in_capture("reserve_graph");
    if (pieces < 1 || pieces > detail::device::most_image_pieces)
      detail::fail("reserve_graph", "a graph's image has 1 to ", detail::device::most_image_pieces,
                   " pieces (a pooler's each); asked for ", pieces);
    const std::size_t slot_bytes = pieces * sizeof(detail::device::image_piece) + bytes;
    audit_.count_allocation();
    auto* host = static_cast<std::byte*>(backend_.allocate_pinned(slot_bytes));
    std::byte* device = nullptr;
    try {
      device = static_cast<std::byte*>(allocate_bytes(bytes));
      return graph_upload<Backend>(*this, host, device, bytes, pieces, owner, backend_.create_event());
    } catch (...) {
      if (device != nullptr) deallocate_bytes(device, bytes);
      backend_.deallocate_pinned(host, slot_bytes);
      throw;
    }
  }

  /// During a capture: the image in the slot of a graph_upload that has served
  /// no graph yet, whose upload will copy `pieces` of it.
  std::span<std::byte> stage(graph_upload<Backend>& home, std::span<const detail::device::image_piece> pieces) {
    check_home(home);
    if (!capturing()) detail::fail("capture", "the stream is not being captured: call it between begin and end");
    if (home.phase_ != graph_upload<Backend>::phase::fresh)
      detail::fail("capture", "this graph_upload already serves a graph; reserve_graph() one per graph");
    list_pieces(home, pieces);
    home.phase_ = graph_upload<Backend>::phase::listed;
    return {home.staged_image(), home.bytes_};
  }

  /// During a capture, after stage(): the graph's upload, a kernel that copies
  /// the pieces the slot lists at each replay, or a copy of the whole image
  /// (launch_policy::captured_upload_in_pieces); the audit counts the bytes
  /// this step's replay moves.
  const std::byte* upload(graph_upload<Backend>& home) {
    check_home(home);
    if (!capturing() || home.phase_ != graph_upload<Backend>::phase::listed)
      detail::fail("capture", "the graph's upload is recorded during a capture, after stage() listed its pieces");
    audit_.count_upload(replayed_bytes(home));
    if constexpr (uploads_in_pieces)
      backend_.launch(detail::device::staging_policy::copy_blocks,
                      detail::device::copy_pieces{home.host_, home.device_, home.pieces_,
                                                  detail::device::staging_policy::copy_blocks});
    else
      backend_.copy_to_device(home.device_, home.staged_image(), home.bytes_);
    home.phase_ = graph_upload<Backend>::phase::staged;
    return home.device_;
  }

  /// Between replays: the image in the graph's slot, once the last launch's
  /// upload has read it (waiting, and counting the wait, only if it has not),
  /// whose next launch will copy `pieces` of it (or all of it): the audit
  /// counts the bytes it will move.
  std::span<std::byte> restage(graph_upload<Backend>& home, std::span<const detail::device::image_piece> pieces) {
    check_home(home);
    refuse_in_capture("restage");
    if (home.phase_ != graph_upload<Backend>::phase::launched)
      detail::fail("restage", "the graph was not launched since it was last staged: launch it, then call "
                              "mark_launched()");
    if (!backend_.is_complete(home.copied_)) {
      audit_.count_wait();
      backend_.wait(home.copied_);
    }
    list_pieces(home, pieces);
    audit_.count_upload(replayed_bytes(home));
    home.phase_ = graph_upload<Backend>::phase::staged;
    return {home.staged_image(), home.bytes_};
  }

  /// Copies host data (weights, hidden states) to the device and waits for the
  /// copy, so the host memory may change at once: never part of a step.
  template <class T>
  void copy_in(std::span<const T> from, cuda::std::span<T> to) {
    audit_.count_upload(from.size_bytes());
    if (!from.empty()) backend_.copy_to_device(to.data(), from.data(), from.size_bytes());
    synchronize();
  }

  /// Copies device memory (results) to the host and waits for it: never part of a step.
  template <class T>
  void copy_out(cuda::std::span<const T> from, std::span<T> to) {
    audit_.count_download();
    if (!from.empty()) backend_.copy_to_host(to.data(), from.data(), from.size_bytes());
    synchronize();
  }

  /// An explicit, counted wait for everything queued: for copies, timing and
  /// teardown. No step calls it; a step that did would show in its audit.
  void synchronize() {
    audit_.count_wait();
    backend_.synchronize();
  }

  const seqpool::audit& audit() const { return audit_; }

 private:
  friend class graph_upload<Backend>;
  friend class seqpool::upload_reservation<Backend>;

  struct staging_slot {
    std::byte* host = nullptr;
    std::size_t capacity = 0;
    typename Backend::event copied{};
    bool in_flight = false;  ///< a copy from it was queued since it was last settled
    bool held = false;       ///< an upload_reservation holds it
  };

  void check_home(const graph_upload<Backend>& home) const {
    if (home.space_ == nullptr)
      detail::fail("graph_upload", "it was moved from: capture and restage with the one it moved into");
    if (home.space_ != this) detail::fail("graph_upload", "it was made by another space");
  }

  /// Writes the list of pieces at the head of the slot: one a piece the
  /// graph_upload was made for, each within its image, on 16-byte boundaries.
  static void list_pieces(graph_upload<Backend>& home, std::span<const detail::device::image_piece> pieces) {
    if (pieces.size() != static_cast<std::size_t>(home.pieces_))
      detail::fail("graph_upload", "it was made for images of ", home.pieces_, " pieces, given ", pieces.size());
    for (const detail::device::image_piece& piece : pieces)
      if (piece.offset % 16 != 0 || piece.bytes % 16 != 0 || piece.offset > home.bytes_ ||
          piece.bytes > home.bytes_ - piece.offset)
        detail::fail("graph_upload", "a piece of ", piece.bytes, " bytes from ", piece.offset,
                     " is not 16-byte aligned within its image of ", home.bytes_, " bytes");
    std::memcpy(home.host_, pieces.data(), pieces.size_bytes());
  }

  /// The bytes a launch of the graph moves: the pieces listed, or the whole image.
  static std::size_t replayed_bytes(const graph_upload<Backend>& home) {
    if (!uploads_in_pieces) return home.bytes_;
    const auto* pieces = reinterpret_cast<const detail::device::image_piece*>(home.host_);
    std::size_t bytes = 0;
    for (int k = 0; k < home.pieces_; ++k) bytes += pieces[k].bytes;
    return bytes;
  }

  /// Makes sure no copy still reads the slot, waiting (and counting the wait)
  /// only if its last copy has not completed.
  void settle(staging_slot& slot) {
    if (slot.in_flight && !backend_.is_complete(slot.copied)) {
      audit_.count_wait();
      backend_.wait(slot.copied);
    }
    slot.in_flight = false;
  }

  /// Grows a slot. Freeing pinned memory waits for the device, so it counts as a
  /// wait as well as a free.
  void grow(staging_slot& slot, std::size_t bytes) {
    if (slot.capacity >= bytes) return;
    settle(slot);
    if (slot.host != nullptr) {
      audit_.count_allocation();
      audit_.count_wait();
      backend_.deallocate_pinned(slot.host, slot.capacity);
      slot.host = nullptr;
      slot.capacity = 0;
    }
    audit_.count_allocation();
    slot.host = static_cast<std::byte*>(backend_.allocate_pinned(bytes));
    slot.capacity = bytes;
  }

  void release(graph_upload<Backend>& home) noexcept {
    backend_.destroy_event(home.copied_);
    audit_.count_allocation();
    backend_.deallocate_pinned(home.host_, home.slot_bytes());
    deallocate_bytes(home.device_, home.bytes_);
  }

  Backend backend_;
  std::vector<staging_slot> ring_;
  std::size_t next_ = 0;               ///< where reserve_upload() looks for a slot first
  std::byte* device_image_ = nullptr;  ///< where eager steps' images are uploaded to
  std::size_t device_capacity_ = 0;
  seqpool::audit audit_;
};

}  // namespace seqpool
