// Memory spaces: what they count, the staging ring, buffers and the block pool.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/detail/block_pool.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>

#include "support/step.hpp"

using device_omp = seqpool::device_space<seqpool::omp_backend>;

static_assert(seqpool::memory_space<seqpool::host_space>);
static_assert(seqpool::memory_space<device_omp>);
static_assert(!std::is_same_v<seqpool::host_space, device_omp>);

TEST_CASE_TEMPLATE("a space counts allocations, copies in and copies out", Space, seqpool::host_space, device_omp) {
  Space space;
  CHECK(space.audit().counts() == seqpool::audit_counts{});
  const std::vector<float> values{1, 2, 3};
  {
    seqpool::buffer<float, Space> memory(space, values.size());
    CHECK(space.audit().counts().allocations == 1);
    space.copy_in(std::span<const float>(values), memory.span());
    CHECK(space.audit().counts().uploads == 1);
    std::vector<float> back(3);
    space.copy_out(cuda::std::span<const float>(memory.data(), 3), std::span<float>(back));
    CHECK(back == values);
    CHECK(space.audit().counts().downloads == 1);
  }
  CHECK(space.audit().counts().allocations == 2);  // the free counts too
}

TEST_CASE("device copies out wait for the copy; host copies have nothing to wait for") {
  device_omp device;
  seqpool::buffer<int, device_omp> on_device(device, 2);
  std::vector<int> back(2);
  device.copy_out(cuda::std::span<const int>(on_device.data(), 2), std::span<int>(back));
  CHECK(device.audit().counts().waits == 1);

  seqpool::host_space host;
  seqpool::buffer<int, seqpool::host_space> on_host(host, 2);
  host.copy_out(cuda::std::span<const int>(on_host.data(), 2), std::span<int>(back));
  CHECK(host.audit().counts().waits == 0);
}

TEST_CASE_TEMPLATE("after reserve_upload a staged upload is one upload and nothing else", Space, seqpool::host_space,
                   device_omp) {
  Space space;
  space.reserve_upload(256);
  const seqpool::audit_scope scope(space.audit());
  const std::span<std::byte> staged = space.stage(100);
  std::memset(staged.data(), 7, staged.size());
  const std::byte* uploaded = space.upload(staged);
  CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1});
  CHECK(seqpool::keeps_sync_contract(scope.counts()));
  CHECK(std::to_integer<int>(uploaded[99]) == 7);
}

TEST_CASE_TEMPLATE("staging without room first is an allocation the audit sees", Space, seqpool::host_space,
                   device_omp) {
  Space space;
  const seqpool::audit_scope scope(space.audit());
  space.upload(space.stage(64));
  CHECK(scope.counts().allocations > 0);
  CHECK_FALSE(seqpool::keeps_sync_contract(scope.counts()));
}

namespace {

/// An OpenMP backend whose copies complete only when the test says so.
class manual_backend : public seqpool::omp_backend {
 public:
  using event = std::size_t;

  explicit manual_backend(std::shared_ptr<std::vector<bool>> complete, std::shared_ptr<bool> capturing = {})
      : complete_(std::move(complete)), capturing_(capturing ? std::move(capturing) : std::make_shared<bool>(false)) {}

  event create_event() {
    complete_->push_back(true);
    return complete_->size() - 1;
  }
  void destroy_event(event) noexcept {}
  void record(event& marker) { (*complete_)[marker] = false; }
  bool is_complete(const event& marker) const { return (*complete_)[marker]; }
  void wait(const event& marker) { (*complete_)[marker] = true; }
  bool is_capturing() const { return *capturing_; }

 private:
  std::shared_ptr<std::vector<bool>> complete_;
  std::shared_ptr<bool> capturing_;
};

}  // namespace

TEST_CASE("a staging slot is rewritten only after the copy from it has completed") {
  auto complete = std::make_shared<std::vector<bool>>();
  seqpool::device_space<manual_backend> space(manual_backend(complete), 2);
  space.reserve_upload(64);
  const seqpool::audit_scope scope(space.audit());

  const std::span<std::byte> first = space.stage(64);
  space.upload(first);
  const std::span<std::byte> second = space.stage(64);
  CHECK(second.data() != first.data());  // the first slot's copy is still in flight
  space.upload(second);
  CHECK(scope.counts().waits == 0);

  SUBCASE("a slot whose copy completed is reused without waiting") {
    complete->assign(complete->size(), true);
    CHECK(space.stage(64).data() == first.data());
    CHECK(scope.counts().waits == 0);
  }
  SUBCASE("a slot whose copy is pending costs a counted wait") {
    CHECK(space.stage(64).data() == first.data());
    CHECK(scope.counts().waits == 1);
  }
  CHECK(scope.counts().allocations == 0);
  CHECK(scope.counts().uploads == 2);
}

TEST_CASE("a slot staged while the stream is captured belongs to the graph from then on") {
  auto complete = std::make_shared<std::vector<bool>>();
  auto capturing = std::make_shared<bool>(false);
  seqpool::device_space<manual_backend> space(manual_backend(complete, capturing), 1);
  space.reserve_upload(64);
  const std::span<std::byte> captured = space.stage(64);
  *capturing = true;
  space.upload(captured);  // the graph replays this copy from `captured`
  *capturing = false;

  // The ring has a fresh slot: the host never rewrites the one the graph reads.
  space.reserve_upload(64);
  const seqpool::audit_scope scope(space.audit());
  const std::span<std::byte> next = space.stage(64);
  CHECK(next.data() != captured.data());
  space.upload(next);
  CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1});
}

TEST_CASE("upload takes only the block the last stage() handed out") {
  device_omp space;
  space.reserve_upload(32);
  std::vector<std::byte> elsewhere(32);
  space.stage(32);
  CHECK_THROWS_AS(space.upload(elsewhere), seqpool::error);
  CHECK_THROWS_AS(device_omp(seqpool::omp_backend{}, 0), seqpool::error);
}

TEST_CASE("host blocks of a huge page and more start on a huge-page boundary") {
  seqpool::host_space host;
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const seqpool::buffer<std::byte, seqpool::host_space> small(host, huge_page - 1);
  const seqpool::buffer<std::byte, seqpool::host_space> large(host, huge_page + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % huge_page == 0);
  large.data()[huge_page] = std::byte{1};  // the whole block is usable
  CHECK(host.audit().counts().allocations == 2);
}

TEST_CASE("buffers move their memory and free it once") {
  seqpool::host_space space;
  seqpool::buffer<double, seqpool::host_space> first(space, 4);
  double* memory = first.data();
  seqpool::buffer<double, seqpool::host_space> second(std::move(first));
  CHECK(second.data() == memory);
  CHECK(second.size() == 4);
  CHECK(first.data() == nullptr);
  seqpool::buffer<double, seqpool::host_space> empty(space, 0);
  CHECK(empty.data() == nullptr);
  second = std::move(empty);
  CHECK(space.audit().counts().allocations == 2);  // one allocation and its free
}

TEST_CASE("the block pool hands back cached blocks before it allocates") {
  seqpool::host_space space;
  seqpool::detail::block_pool<seqpool::host_space> pool(space);
  void* block = pool.take(1000);
  CHECK(space.audit().counts().allocations == 1);
  pool.give_back(block, 1000);
  CHECK(pool.cached_blocks() == 1);
  CHECK(pool.take(600) == block);  // same size class (1024 bytes)
  CHECK(space.audit().counts().allocations == 1);
  void* larger = pool.take(5000);
  CHECK(larger != block);
  CHECK(space.audit().counts().allocations == 2);
  pool.give_back(block, 600);
  pool.give_back(larger, 5000);
  pool.trim();
  CHECK(pool.cached_blocks() == 0);
  CHECK(space.audit().counts().allocations == 4);
}
