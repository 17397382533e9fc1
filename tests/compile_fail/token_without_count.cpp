// A user-written token method without count(): the pooler must say what is missing.
#include <cstdint>
#include <span>
#include <vector>

#include <seqpool/seqpool.hpp>

struct every_other_row {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr bool reads_token_ids = false;

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end,
              std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin + begin % 2; position < end; position += 2) positions.push_back(position);
  }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return {}; }
};

int main() {
  seqpool::host_space space;
  seqpool::pooler<every_other_row, seqpool::head::embed, seqpool::host_space> pooler(space, 4);
}
