// Memory spaces: what they count, the staging ring, buffers and the allocation cache.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <doctest/doctest.h>
#include <omp.h>

#include <seqpool/detail/allocation_cache.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>

#include "support/step.hpp"

using device_omp = seqpool::device_space<seqpool::omp_backend>;

static_assert(seqpool::memory_space<seqpool::host_space>);
static_assert(seqpool::memory_space<device_omp>);
static_assert(!std::is_same_v<seqpool::host_space, device_omp>);

namespace {

/// Fills a staged image with bytes that say where they lie, shifted by `value`.
void fill_image(std::span<std::byte> image, int value) {
  for (std::size_t k = 0; k < image.size(); ++k) image[k] = static_cast<std::byte>((k + value) % 251);
}

/// The `bytes` of device memory from `device`.
template <class Space>
std::vector<std::byte> read_image(Space& space, const std::byte* device, std::size_t bytes) {
  std::vector<std::byte> copied(bytes);
  space.copy_out(cuda::std::span<const std::byte>(device, bytes), std::span<std::byte>(copied));
  return copied;
}

}  // namespace

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
  typename Space::upload_reservation reservation;
  space.reserve_upload(256, reservation);
  const seqpool::audit_scope scope(space.audit());
  const std::span<std::byte> staged = space.stage(reservation, 100);
  std::memset(staged.data(), 7, staged.size());
  const std::byte* uploaded = space.upload(reservation, staged);
  CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = 100});
  CHECK(seqpool::keeps_sync_contract(scope.counts()));
  CHECK(std::to_integer<int>(uploaded[99]) == 7);
}

TEST_CASE_TEMPLATE("staging without room made first throws before anything is written", Space, seqpool::host_space,
                   device_omp) {
  Space space;
  const seqpool::audit_scope scope(space.audit());
  CHECK_THROWS_WITH_AS(space.stage(typename Space::upload_reservation{}, 64),
                       doctest::Contains("call reserve() with this step's plan before"), seqpool::error);
  CHECK(scope.counts() == seqpool::audit_counts{});
}

TEST_CASE("a dispatcher's first reserve grows the staging ring once, for the whole step's image") {
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  namespace method = seqpool::method;
  namespace head = seqpool::head;
  using seqpool::task;
  seqpool::dispatcher<seqpool::configurable_table<device_omp>> engine(
      space, seqpool::pooler<method::any_sequence, head::embed, device_omp>(space, 8, method::mean{}),
      seqpool::pooler<method::any_sequence, head::classify, device_omp>(space, 8, method::cls{}),
      seqpool::pooler<method::any_token, head::embed, device_omp>(space, 8, method::all{}),
      seqpool::pooler<method::any_token, head::classify, device_omp>(space, 8, method::all{}));
  const seqpool::batch step{{test::whole("a", task::embed, 2), test::whole("b", task::classify, 3),
                             test::whole("c", task::token_embed, 4), test::whole("d", task::token_classify, 5)}};
  const seqpool::step_plan plan = engine.plan(step, state);
  const seqpool::audit_scope scope(space.audit());
  engine.reserve(plan, state);
  // The four staging slots and the device's image, once each (no pooler needs workspace here).
  CHECK(scope.counts() == seqpool::audit_counts{.allocations = 5});
}

namespace {

/// An OpenMP backend whose copies complete only when the test says so.
class manual_backend : public seqpool::omp_backend {
 public:
  using event = std::size_t;

  explicit manual_backend(std::shared_ptr<std::vector<bool>> complete) : complete_(std::move(complete)) {}

  event create_event() {
    complete_->push_back(true);
    return complete_->size() - 1;
  }
  void destroy_event(event) noexcept {}
  void record(event& marker) { (*complete_)[marker] = false; }
  bool is_complete(const event& marker) const { return (*complete_)[marker]; }
  void wait(const event& marker) { (*complete_)[marker] = true; }

 private:
  std::shared_ptr<std::vector<bool>> complete_;
};

}  // namespace

TEST_CASE("a staging slot is settled outside the step, and only once its copy has completed") {
  auto complete = std::make_shared<std::vector<bool>>();
  using space_type = seqpool::device_space<manual_backend>;
  space_type space(manual_backend(complete), 2);
  space_type::upload_reservation reservation;
  space.reserve_upload(64, reservation);
  const std::span<std::byte> first = space.stage(reservation, 64);
  space.upload(reservation, first);
  CHECK_FALSE(reservation.held());
  space.reserve_upload(64, reservation);
  const std::span<std::byte> second = space.stage(reservation, 64);
  CHECK(second.data() != first.data());  // the first slot's copy is still in flight
  space.upload(reservation, second);
  const seqpool::audit_scope scope(space.audit());

  SUBCASE("a step that was not reserved for refuses to stage, whatever the slots' copies") {
    CHECK_THROWS_AS(space.stage(reservation, 64), seqpool::error);
    complete->assign(complete->size(), true);
    CHECK_THROWS_AS(space.stage(reservation, 64), seqpool::error);
    CHECK(scope.counts() == seqpool::audit_counts{});
  }
  SUBCASE("a slot whose copy completed is settled without waiting") {
    complete->assign(complete->size(), true);
    space.reserve_upload(64, reservation);
    CHECK(space.stage(reservation, 64).data() == first.data());
    CHECK(scope.counts() == seqpool::audit_counts{});
  }
  SUBCASE("a slot whose copy is pending costs reserve_upload a counted wait, never the step") {
    space.reserve_upload(64, reservation);
    CHECK(scope.counts() == seqpool::audit_counts{.waits = 1});
    const seqpool::audit_scope step(space.audit());
    space.upload(reservation, space.stage(reservation, 64));
    CHECK(step.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = 64});
  }
  SUBCASE("reserving again before the step keeps the slot held, and waits for nothing more") {
    space.reserve_upload(64, reservation);
    const std::byte* held = space.stage(reservation, 64).data();
    space.reserve_upload(64, reservation);
    CHECK(space.stage(reservation, 64).data() == held);
    CHECK(scope.counts() == seqpool::audit_counts{.waits = 1});
  }
  SUBCASE("growing a slot waits for its copy and frees it, which waits too") {
    space.reserve_upload(128, reservation);
    CHECK(scope.counts().waits >= 2);
    CHECK(scope.counts().allocations == 2 + 2 + 2);  // two slots freed and allocated, and the device's image
  }
}

TEST_CASE("each reservation holds a slot of its own, so that steps reserved together each stage in theirs") {
  auto complete = std::make_shared<std::vector<bool>>();
  using space_type = seqpool::device_space<manual_backend>;
  space_type space(manual_backend(complete), 3);
  space_type::upload_reservation first;
  space_type::upload_reservation second;
  // Two poolers sharing the space each reserve before either forwards, round
  // after round, while the device completes every copy: no step is refused,
  // none waits, and no reservation waits for a copy that has completed.
  for (int round = 0; round < 6; ++round) {
    const seqpool::audit_scope reserving(space.audit());
    space.reserve_upload(64, first);
    space.reserve_upload(64, second);
    CHECK(reserving.counts().waits == 0);
    CHECK(space.stage(first, 64).data() != space.stage(second, 64).data());
    for (space_type::upload_reservation* pooler : {&second, &first}) {
      const seqpool::audit_scope step(space.audit());
      space.upload(*pooler, space.stage(*pooler, 64));
      CHECK(step.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = 64});
    }
    complete->assign(complete->size(), true);
  }

  SUBCASE("a reservation takes the next slot in ring order, waiting only if its copy pends") {
    space.reserve_upload(64, first);
    space.reserve_upload(64, second);
    space.upload(first, space.stage(first, 64));
    space.upload(second, space.stage(second, 64));  // the copies from two slots pend
    const seqpool::audit_scope scope(space.audit());
    space.reserve_upload(64, first);  // the third slot, whose copy completed
    CHECK(scope.counts() == seqpool::audit_counts{});
    space.reserve_upload(64, second);  // the first of the two, whose copy pends
    CHECK(scope.counts() == seqpool::audit_counts{.waits = 1});
  }
  SUBCASE("a held slot is passed over, and a reservation dropped unused gives its slot back") {
    space.reserve_upload(64, first);
    const std::byte* held = space.stage(first, 64).data();
    for (int step = 0; step < 4; ++step) {
      space.reserve_upload(64, second);
      CHECK(space.stage(second, 64).data() != held);
      space.upload(second, space.stage(second, 64));
    }
    first = space_type::upload_reservation{};
    CHECK_FALSE(first.held());
    space.reserve_upload(64, second);  // the ring's order comes round to it
    CHECK(space.stage(second, 64).data() == held);
  }
  SUBCASE("no more reservations are held at once than the ring has slots") {
    space_type::upload_reservation third;
    space_type::upload_reservation fourth;
    space.reserve_upload(64, first);
    space.reserve_upload(64, second);
    space.reserve_upload(64, third);
    const seqpool::audit_scope scope(space.audit());
    CHECK_THROWS_WITH_AS(space.reserve_upload(64, fourth), doctest::Contains("each of the 3 staging slots is held"),
                         seqpool::error);
    CHECK(scope.counts() == seqpool::audit_counts{});
    CHECK_FALSE(fourth.held());
    { space_type::upload_reservation moved(std::move(third)); }
    CHECK_FALSE(third.held());
    space.reserve_upload(64, fourth);
    CHECK(fourth.held());
  }
  SUBCASE("a reservation stages and uploads only in the space that made it") {
    space_type other(manual_backend(complete), 1);
    space.reserve_upload(64, first);
    CHECK_THROWS_WITH_AS(other.reserve_upload(64, first), doctest::Contains("holds a slot of another space"),
                         seqpool::error);
    CHECK_THROWS_AS(other.stage(first, 64), seqpool::error);
    CHECK_THROWS_AS(other.upload(first, space.stage(first, 64)), seqpool::error);
  }
}

TEST_CASE("the capture stand-in refuses what CUDA refuses during a capture, and replays what it recorded") {
  device_omp space;
  device_omp::upload_reservation reservation;
  space.reserve_upload(16, reservation);
  seqpool::buffer<int, device_omp> value(space, 1);
  space.zero(value.data(), sizeof(int));
  space.backend().begin_capture();
  CHECK(space.capturing());
  CHECK_THROWS_WITH_AS(space.synchronize(), doctest::Contains("cudaStreamSynchronize"), seqpool::device_error);
  CHECK_THROWS_WITH_AS(space.allocate_bytes(8), doctest::Contains("cudaMallocAsync"), seqpool::device_error);
  CHECK_THROWS_WITH_AS(space.reserve_upload(64, reservation), doctest::Contains("outside stream capture"),
                       seqpool::error);
  CHECK_THROWS_WITH_AS(space.backend().is_complete({}), doctest::Contains("cudaEventQuery"), seqpool::device_error);
  // A copy is recorded, not run: its source is read when the graph is launched.
  std::vector<int> source{3};
  space.backend().copy_to_device(value.data(), source.data(), sizeof(int));
  const seqpool::omp_backend::graph graph = space.backend().end_capture();
  CHECK_FALSE(space.capturing());
  std::vector<int> back(1);
  space.copy_out(cuda::std::span<const int>(value.data(), 1), std::span<int>(back));
  CHECK(back[0] == 0);
  source[0] = 5;
  graph.launch();
  space.copy_out(cuda::std::span<const int>(value.data(), 1), std::span<int>(back));
  CHECK(back[0] == 5);

  SUBCASE("a free during a capture fails the capture when it ends") {
    space.backend().begin_capture();
    { seqpool::buffer<int, device_omp> freed(std::move(value)); }
    CHECK_THROWS_WITH_AS(space.backend().end_capture(), doctest::Contains("cudaFreeAsync"), seqpool::device_error);
  }
}

TEST_CASE("a graph's upload copies the pieces its slot lists at each launch, and no piece outside the image") {
  device_omp space;
  constexpr std::size_t image_bytes = 4 * 1024;
  auto home = space.reserve_graph(image_bytes, 2, 7);
  seqpool::buffer<std::byte, device_omp> unused(space, 16);  // the device image is not the only allocation
  using piece = decltype(home)::piece;

  CHECK_THROWS_WITH_AS(space.upload(home), doctest::Contains("during a capture, after stage()"), seqpool::error);
  space.backend().begin_capture();
  CHECK_THROWS_WITH_AS(space.upload(home), doctest::Contains("after stage() listed its pieces"), seqpool::error);
  const std::vector<piece> listed{{0, 64}, {1024, 2048}};
  CHECK_THROWS_WITH_AS(space.stage(home, std::vector<piece>{{0, 64}}),
                       doctest::Contains("made for images of 2 pieces, given 1"), seqpool::error);
  CHECK_THROWS_AS(space.stage(home, std::vector<piece>{{0, 64}, {4096 - 16, 32}}), seqpool::error);
  CHECK_THROWS_AS(space.stage(home, std::vector<piece>{{8, 64}, {1024, 16}}), seqpool::error);
  fill_image(space.stage(home, listed), 0);
  const std::byte* device = space.upload(home);
  const seqpool::omp_backend::graph graph = space.backend().end_capture();
  graph.launch();
  home.mark_launched();
  std::vector<std::byte> expected(image_bytes);
  fill_image(expected, 0);
  std::vector<std::byte> copied = read_image(space, device, image_bytes);
  // Each piece copied, every byte outside them left alone (the device image
  // begins as whatever the allocation held: compare only inside the pieces).
  CHECK(std::equal(copied.begin(), copied.begin() + 64, expected.begin()));
  CHECK(std::equal(copied.begin() + 1024, copied.begin() + 3072, expected.begin() + 1024));

  // Restaged with other pieces: the next launch copies those, over what was there.
  const std::vector<piece> next{{512, 16}, {3072, 1024}};
  std::vector<std::byte> before = copied;
  const seqpool::audit_scope scope(space.audit());
  fill_image(space.restage(home, next), 3);
  CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = 16 + 1024});
  graph.launch();
  home.mark_launched();
  copied = read_image(space, device, image_bytes);
  fill_image(expected, 3);
  CHECK(std::equal(copied.begin(), copied.begin() + 512, before.begin()));
  CHECK(std::equal(copied.begin() + 512, copied.begin() + 528, expected.begin() + 512));
  CHECK(std::equal(copied.begin() + 528, copied.begin() + 3072, before.begin() + 528));
  CHECK(std::equal(copied.begin() + 3072, copied.end(), expected.begin() + 3072));
  CHECK_THROWS_WITH_AS(space.reserve_graph(64, 33, 7), doctest::Contains("1 to 32 pieces"), seqpool::error);
}

TEST_CASE("under whole_image_capture_policy a graph's upload copies the whole image at each launch") {
  using whole_image_omp = seqpool::device_space<
      seqpool::with_policy<seqpool::omp_backend, seqpool::detail::device::whole_image_capture_policy>>;
  whole_image_omp space;
  constexpr std::size_t image_bytes = 4 * 1024;
  auto home = space.reserve_graph(image_bytes, 2, 7);
  using piece = decltype(home)::piece;
  std::vector<std::byte> expected(image_bytes);

  space.backend().begin_capture();
  std::optional<seqpool::omp_backend::graph> graph;
  const std::byte* device = nullptr;
  {
    const seqpool::audit_scope scope(space.audit());
    fill_image(space.stage(home, std::vector<piece>{{0, 64}, {1024, 2048}}), 0);
    device = space.upload(home);
    CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = image_bytes});
  }
  graph.emplace(space.backend().end_capture());
  CHECK(graph->size() == 1);  // one copy node, no kernel
  graph->launch();
  home.mark_launched();
  fill_image(expected, 0);
  CHECK(read_image(space, device, image_bytes) == expected);

  // Restaged with pieces that cover little: the next launch still copies every byte.
  const seqpool::audit_scope scope(space.audit());
  fill_image(space.restage(home, std::vector<piece>{{512, 16}, {3072, 16}}), 3);
  CHECK(scope.counts() == seqpool::audit_counts{.uploads = 1, .upload_bytes = image_bytes});
  graph->launch();
  home.mark_launched();
  fill_image(expected, 3);
  CHECK(read_image(space, device, image_bytes) == expected);
}

TEST_CASE("the stand-in's branches: each branch's work runs at the join, last branch first") {
  device_omp space;
  seqpool::buffer<int, device_omp> slot(space, 1);
  space.zero(slot.data(), sizeof(int));
  // Each branch writes its number + 10 into the one slot: the write that runs last stays.
  const std::vector<int> written{10, 11, 12};
  const auto write_from = [&](int branch) {
    space.select_branch(branch);
    space.backend().copy_to_device(slot.data(), &written[static_cast<std::size_t>(branch)], sizeof(int));
  };
  const auto read = [&] {
    std::vector<int> value(1);
    space.copy_out(cuda::std::span<const int>(slot.data(), 1), std::span<int>(value));
    return value[0];
  };

  CHECK_THROWS_WITH_AS(space.fork_branches(3), doctest::Contains("3 branches, but room for 1 was reserved"),
                       seqpool::device_error);
  space.reserve_branches(3);
  space.fork_branches(3);
  for (int branch = 0; branch < 3; ++branch) write_from(branch);
  CHECK_THROWS_WITH_AS(space.select_branch(3), doctest::Contains("no branch 3 of 3"), seqpool::device_error);
  CHECK_THROWS_WITH_AS(space.fork_branches(2), doctest::Contains("not joined"), seqpool::device_error);
  space.join_branches();
  CHECK(read() == 10);  // branch 2, then 1, then 0

  SUBCASE("a capture records the branches at the join, and may not end with them open") {
    space.zero(slot.data(), sizeof(int));
    space.backend().begin_capture();
    CHECK_THROWS_WITH_AS(space.reserve_branches(4), doctest::Contains("outside stream capture"), seqpool::error);
    space.fork_branches(2);
    write_from(1);
    CHECK_THROWS_WITH_AS(space.backend().end_capture(), doctest::Contains("cudaErrorStreamCaptureUnjoined"),
                         seqpool::device_error);
    CHECK_FALSE(space.capturing());  // the capture ended, its graph lost
    space.backend().begin_capture();
    space.fork_branches(2);
    write_from(0);
    write_from(1);
    space.join_branches();
    const seqpool::omp_backend::graph graph = space.backend().end_capture();
    CHECK(graph.size() == 2);
    CHECK(read() == 0);
    graph.launch();
    CHECK(read() == 10);
  }
}

TEST_CASE(
    "host branches: each branch's passes are held to the join, then run in rounds, a slot an even share of each") {
  seqpool::host_space space;
  using ran_item = std::pair<int, std::int64_t>;  // a pass, an item of it
  std::vector<ran_item> ran;
  /// A pass's work: each item notes that it ran.
  struct noting {
    int pass;
    std::vector<ran_item>* ran;
    void operator()(std::int64_t item) const { ran->push_back({pass, item}); }
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // one thread runs the slots in order, and notes them in order
  CHECK_THROWS_WITH_AS(space.fork_branches(3), doctest::Contains("3 branches, but room for 0 was reserved"),
                       seqpool::error);
  space.reserve_branches(3);
  space.fork_branches(3);
  space.launch(2, noting{0, &ran});  // branch 0: pass 0, then pass 1, which reads it
  space.launch(3, noting{1, &ran});
  space.select_branch(2);  // branch 1 holds nothing
  space.launch(4, noting{2, &ran});
  CHECK(ran.empty());
  CHECK(space.audit().counts().launches == 3);
  CHECK_THROWS_WITH_AS(space.select_branch(1), doctest::Contains("in order: 1 after 2"), seqpool::error);
  CHECK_THROWS_WITH_AS(space.select_branch(3), doctest::Contains("no branch 3 of 3"), seqpool::error);
  CHECK_THROWS_WITH_AS(space.fork_branches(2), doctest::Contains("not joined"), seqpool::error);
  space.join_branches();
  // Round 0, passes 0 and 2 over 4 slots: slot s takes pass 0's items [2s/4, 2(s+1)/4), then pass 2's
  // item s. Round 1: pass 1 over its 3.
  const std::vector<ran_item> expected{{2, 0}, {0, 0}, {2, 1}, {2, 2}, {0, 1}, {2, 3}, {1, 0}, {1, 1}, {1, 2}};
  CHECK(ran == expected);
  // Joined: a pass runs as it is launched.
  ran.clear();
  space.launch(2, noting{3, &ran});
  CHECK(ran == std::vector<ran_item>{{3, 0}, {3, 1}});
  CHECK_THROWS_WITH_AS(space.select_branch(0), doctest::Contains("no branch 0 of 0"), seqpool::error);
  // Dropped (a step whose launch threw): nothing held runs, and the next pass runs at once.
  ran.clear();
  space.fork_branches(2);
  space.launch(5, noting{4, &ran});
  space.drop_branches();
  CHECK(ran.empty());
  space.launch(1, noting{5, &ran});
  CHECK(ran == std::vector<ran_item>{{5, 0}});
  omp_set_num_threads(threads);
}

TEST_CASE("the stand-in's wave: every grid runs every block index once, whatever its size") {
  for (const std::int64_t wave : {1, 3, 64}) {
    CAPTURE(wave);
    seqpool::device_space<seqpool::omp_backend> space{seqpool::omp_backend(wave)};
    auto home = space.reserve_graph(16 * 1024, 1, 1);
    space.backend().begin_capture();
    const std::vector<decltype(home)::piece> whole{{0, 16 * 1024}};
    std::span<std::byte> image = space.stage(home, whole);
    for (std::size_t k = 0; k < image.size(); ++k) image[k] = static_cast<std::byte>(k % 253);
    const std::byte* device = space.upload(home);
    space.backend().end_capture().launch();
    std::vector<std::byte> copied(image.size());
    space.copy_out(cuda::std::span<const std::byte>(device, copied.size()), std::span<std::byte>(copied));
    CHECK(std::equal(copied.begin(), copied.end(), image.begin()));
  }
  CHECK_THROWS_AS(seqpool::omp_backend(0), seqpool::device_error);
}

TEST_CASE("upload takes only the image stage() handed out in the reservation's slot") {
  device_omp space;
  device_omp::upload_reservation reservation;
  space.reserve_upload(32, reservation);
  std::vector<std::byte> elsewhere(32);
  const std::span<std::byte> staged = space.stage(reservation, 32);
  CHECK_THROWS_AS(space.upload(reservation, elsewhere), seqpool::error);
  CHECK_THROWS_AS(space.upload(reservation, {staged.data(), 33}), seqpool::error);  // past the slot
  CHECK(reservation.held());
  CHECK_THROWS_AS(device_omp(seqpool::omp_backend{}, 0), seqpool::error);
}

TEST_CASE("host allocations of a huge page and more start on a huge-page boundary") {
  seqpool::host_space host;
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const seqpool::buffer<std::byte, seqpool::host_space> small(host, huge_page - 1);
  const seqpool::buffer<std::byte, seqpool::host_space> large(host, huge_page + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % huge_page == 0);
  large.data()[huge_page] = std::byte{1};  // the whole allocation is usable
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

TEST_CASE("the allocation cache hands back cached allocations before it allocates") {
  seqpool::host_space space;
  seqpool::detail::allocation_cache<seqpool::host_space> cache(space);
  void* memory = cache.take(1000);
  CHECK(space.audit().counts().allocations == 1);
  cache.give_back(memory, 1000);
  CHECK(cache.cached_allocations() == 1);
  CHECK(cache.take(600) == memory);  // same size class (1024 bytes)
  CHECK(space.audit().counts().allocations == 1);
  void* larger = cache.take(5000);
  CHECK(larger != memory);
  CHECK(space.audit().counts().allocations == 2);
  cache.give_back(memory, 600);
  cache.give_back(larger, 5000);
  cache.trim();
  CHECK(cache.cached_allocations() == 0);
  CHECK(space.audit().counts().allocations == 4);
}
