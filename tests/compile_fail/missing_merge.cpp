// A user-written sequence method without merge(): the pooler must refuse it and
// say which member is missing.
#include <cstdint>

#include <seqpool/seqpool.hpp>

struct sum_without_merge {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::sequence;
  static constexpr bool keeps_state = true;

  seqpool::row_window window(const seqpool::chunk& part) const { return {part.first_row(), part.num_scheduled}; }
  float identity() const { return 0.0f; }
  float accumulate(float sum, float x) const { return sum + x; }
  float finish(float sum, std::int64_t) const { return sum; }
};

int main() {
  seqpool::host_space space;
  seqpool::pooler<sum_without_merge, seqpool::head::embed, seqpool::host_space> pooler(space, 4);
}
