// A concat of a sequence method and a token method: the concat must refuse it
// and say that it joins sequence methods.
#include <seqpool/seqpool.hpp>

int main() {
  seqpool::host_space space;
  using mean_and_rows = seqpool::method::concat<seqpool::method::mean, seqpool::method::all>;
  seqpool::pooler<mean_and_rows, seqpool::head::embed, seqpool::host_space> pooler(space, 4);
}
