// Sparse results of a sequence method: a sparse result lists a token method's
// rows by id, and the pooler must say so.
#include <seqpool/seqpool.hpp>

int main() {
  seqpool::host_space space;
  seqpool::pooler<seqpool::method::mean, seqpool::head::classify, seqpool::host_space, seqpool::sparse_entry> pooler(
      space, 4);
}
