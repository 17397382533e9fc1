// The CUB route to MEAN, pool_bench_cuda's "mean@cub": what a user who reaches
// for CCCL's device algorithms instead of writing kernels would run, so that the
// figures show what seqpool's own kernels are for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_segmented_reduce.cuh>

#include "ceilings.hpp"

namespace bench {

/// Hidden states [rows, H] read column by column: value i is row i % rows of
/// column i / rows, so that a request's rows of one column are consecutive
/// values, as a segmented reduction needs them.
template <class T>
struct column_major_value {
  const T* hidden;
  std::int64_t rows;
  std::int64_t stride;

  __device__ float operator()(std::int64_t i) const {
    return static_cast<float>(hidden[(i % rows) * stride + i / rows]);
  }
};

/// Where segment s — column s % width of request s / width — begins among the
/// column-major values (or, for `end`, ends).
struct segment_bound {
  const std::int64_t* first_rows;
  const std::int64_t* lengths;
  std::int64_t rows;
  std::int64_t width;
  bool end;

  __device__ std::int64_t operator()(std::int64_t s) const {
    const std::int64_t request = s / width;
    const std::int64_t begin = s % width * rows + first_rows[request];
    return end ? begin + lengths[request] : begin;
  }
};

/// Frees what cudaMalloc gave (a unique_ptr's deleter).
struct device_freer {
  void operator()(void* memory) const { cudaFree(memory); }
};

/// Every request's column sums of hidden states [rows, width] (a row `stride`
/// elements after the one before), request r's rows `lengths[r]` from
/// `first_rows[r]`, by cub::DeviceSegmentedReduce::Sum: a segment a request's
/// column, its values a column's rows. The sums alone, into `sums()` [requests,
/// width]: a mean's division and a head's normalisation would be a small kernel
/// more. Its memory is taken when it is made, none when it runs.
template <class T>
class segmented_sums {
 public:
  segmented_sums(const T* hidden, std::int64_t rows, std::int64_t width, std::int64_t stride,
                 const std::vector<std::int64_t>& first_rows, const std::vector<std::int64_t>& lengths)
      : hidden_(hidden),
        rows_(rows),
        width_(width),
        stride_(stride),
        requests_(static_cast<std::int64_t>(lengths.size())) {
    first_rows_ = device_copy(first_rows);
    lengths_ = device_copy(lengths);
    sums_ = allocate<float>(static_cast<std::size_t>(requests_ * width_));
    detail::check(reduce(nullptr, temp_bytes_, nullptr), "cub::DeviceSegmentedReduce::Sum (sizing)");
    temp_ = allocate<std::byte>(temp_bytes_);
  }

  /// Queues the sums on `stream`.
  void run(cudaStream_t stream) {
    detail::check(reduce(temp_.get(), temp_bytes_, stream), "cub::DeviceSegmentedReduce::Sum");
  }

  float* sums() const { return sums_.get(); }
  std::int64_t size() const { return requests_ * width_; }

 private:
  template <class U>
  using device_memory = std::unique_ptr<U[], device_freer>;

  template <class U>
  static device_memory<U> allocate(std::size_t count) {
    void* memory = nullptr;
    detail::check(cudaMalloc(&memory, count * sizeof(U)), "cudaMalloc");
    return device_memory<U>(static_cast<U*>(memory));
  }

  static device_memory<std::int64_t> device_copy(const std::vector<std::int64_t>& values) {
    device_memory<std::int64_t> copy = allocate<std::int64_t>(values.size());
    detail::check(cudaMemcpy(copy.get(), values.data(), values.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice),
                  "cudaMemcpy");
    return copy;
  }

  cudaError_t reduce(void* temp, std::size_t& temp_bytes, cudaStream_t stream) const {
    const thrust::counting_iterator<std::int64_t> index(0);
    const auto values = thrust::make_transform_iterator(index, column_major_value<T>{hidden_, rows_, stride_});
    const auto begins =
        thrust::make_transform_iterator(index, segment_bound{first_rows_.get(), lengths_.get(), rows_, width_, false});
    const auto ends =
        thrust::make_transform_iterator(index, segment_bound{first_rows_.get(), lengths_.get(), rows_, width_, true});
    float* const sums = sums_.get();
    return cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, values, sums, requests_ * width_, begins, ends, stream);
  }

  const T* hidden_;
  std::int64_t rows_;
  std::int64_t width_;
  std::int64_t stride_;
  std::int64_t requests_;
  device_memory<std::int64_t> first_rows_;
  device_memory<std::int64_t> lengths_;
  device_memory<float> sums_;
  device_memory<std::byte> temp_;
  std::size_t temp_bytes_ = 0;
};

}  // namespace bench
