// DLPack tensors built by hand, as an engine hands them over: every accepted
// layout and dtype, every rejected one with its message, and a step pooled from
// DLPack views equal to the same step from seqpool's own.
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/dlpack.hpp>
#include <seqpool/seqpool.hpp>

#include "support/step.hpp"

namespace {

namespace dlpack = seqpool::dlpack;

/// A DLTensor over `data` with the given shape and strides (empty: compact).
struct tensor {
  std::vector<std::int64_t> shape, strides;
  DLTensor dl{};

  tensor(void* data, DLDataType dtype, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_ = {},
         DLDeviceType device = kDLCPU)
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    dl.data = data;
    dl.device = {device, 0};
    dl.ndim = static_cast<std::int32_t>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
  }
};

constexpr DLDataType float32{kDLFloat, 32, 1}, float16{kDLFloat, 16, 1}, bfloat16{kDLBfloat, 16, 1},
    int64{kDLInt, 64, 1}, int32{kDLInt, 32, 1}, int8{kDLInt, 8, 1}, uint8{kDLUInt, 8, 1};

/// DLManagedTensorVersioned of DLPack 1.x, laid out as its header declares it
/// (Debian's libdlpack-dev is 0.6, which has none).
struct versioned_tensor {
  struct {
    std::uint32_t major, minor;
  } version;
  void* manager_ctx;
  void (*deleter)(versioned_tensor*);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace

TEST_CASE("hidden states: every accepted dtype and layout, viewed without a copy") {
  std::vector<float> rows(3 * 8);
  SUBCASE("float32, compact") {
    tensor t(rows.data(), float32, {3, 8});
    const auto view = dlpack::hidden<float, seqpool::host_space>(t.dl);
    CHECK(view.data_handle() == rows.data());
    CHECK(view.extent(0) == 3);
    CHECK(view.extent(1) == 8);
    CHECK(view.stride(0) == 8);
  }
  SUBCASE("float32, rows further apart than hidden_size, with a byte offset") {
    tensor t(rows.data(), float32, {2, 5}, {8, 1});
    t.dl.byte_offset = 4 * sizeof(float);
    const auto view = dlpack::hidden<float, seqpool::device_space<seqpool::omp_backend>>(t.dl);
    CHECK(view.data_handle() == rows.data() + 4);
    CHECK(view.stride(0) == 8);
    CHECK(view.extent(1) == 5);
  }
  SUBCASE("float16 and bfloat16, seqpool's types and CUDA's") {
    std::vector<std::uint16_t> bits(16);
    tensor half(bits.data(), float16, {2, 8});
    tensor bf(bits.data(), bfloat16, {2, 8});
    CHECK(dlpack::hidden<seqpool::half, seqpool::host_space>(half.dl).extent(0) == 2);
    CHECK(dlpack::hidden<__half, seqpool::host_space>(half.dl).extent(0) == 2);
    CHECK(dlpack::hidden<seqpool::bfloat16, seqpool::host_space>(bf.dl).extent(0) == 2);
    CHECK(dlpack::hidden<__nv_bfloat16, seqpool::host_space>(bf.dl).extent(0) == 2);
    int visited = 0;
    dlpack::visit_hidden<seqpool::host_space>(bf.dl, [&](auto view) {
      CHECK(std::same_as<typename decltype(view)::element_type, const seqpool::bfloat16>);
      ++visited;
    });
    CHECK(visited == 1);
  }
  SUBCASE("a padded [B, S, H] tensor as its B·S rows, in a wider buffer") {
    tensor padded(rows.data(), float32, {2, 3, 3}, {12, 4, 1});
    const auto view = dlpack::hidden<float, seqpool::host_space>(padded.dl);
    CHECK(view.extent(0) == 6);
    CHECK(view.extent(1) == 3);
    CHECK(view.stride(0) == 4);
  }
  SUBCASE("pinned host memory, one row with any stride, no rows") {
    tensor pinned(rows.data(), float32, {3, 8}, {}, kDLCUDAHost);
    CHECK(dlpack::hidden<float, seqpool::host_space>(pinned.dl).extent(0) == 3);
    tensor one(rows.data(), float32, {1, 8}, {1, 1});
    CHECK(dlpack::hidden<float, seqpool::host_space>(one.dl).stride(0) == 8);
    tensor none(rows.data(), float32, {0, 8});
    CHECK(dlpack::hidden<float, seqpool::host_space>(none.dl).extent(0) == 0);
  }
}

TEST_CASE("hidden states: every rejected tensor says what it found and what it needs") {
  std::vector<float> rows(3 * 8);
  using host = seqpool::host_space;
  tensor on_gpu(rows.data(), float32, {3, 8}, {}, kDLCUDA);
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(on_gpu.dl)),
                       "hidden states: the tensor is on kDLCUDA, which host_space does not read; it needs kDLCPU or "
                       "kDLCUDAHost",
                       seqpool::error);
  tensor wrong_type(rows.data(), float16, {3, 8});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(wrong_type.dl)),
                       "hidden states: the tensor holds float16, the view is of 32-bit elements of another type",
                       seqpool::error);
  tensor doubles(rows.data(), DLDataType{kDLFloat, 64, 1}, {3, 4});
  CHECK_THROWS_WITH_AS((dlpack::visit_hidden<host>(doubles.dl, [](auto) {})),
                       "hidden states: the tensor holds float64; seqpool reads float32, float16 and bfloat16",
                       seqpool::error);
  tensor lanes(rows.data(), DLDataType{kDLFloat, 32, 2}, {3, 4});
  CHECK_THROWS_WITH_AS((dlpack::visit_hidden<host>(lanes.dl, [](auto) {})),
                       "hidden states: the tensor holds float32x2; seqpool reads float32, float16 and bfloat16",
                       seqpool::error);
  // A bool tensor (DLPack 0.8's kDLBool, code 6) and a complex one are named as DLPack names them.
  for (const auto& [type, name] :
       {std::pair{DLDataType{6, 8, 1}, "bool"}, std::pair{DLDataType{6, 8, 4}, "boolx4"},
        std::pair{DLDataType{kDLComplex, 64, 1}, "complex64"}, std::pair{DLDataType{9, 8, 1}, "type code 9 of 8"}}) {
    tensor other(rows.data(), type, {3, 4});
    CHECK_THROWS_WITH_AS(
        (dlpack::visit_hidden<host>(other.dl, [](auto) {})),
        (std::string("hidden states: the tensor holds ") + name + "; seqpool reads float32, float16 and bfloat16")
            .c_str(),
        seqpool::error);
  }
  tensor four_d(rows.data(), float32, {1, 1, 3, 8});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(four_d.dl)),
                       "hidden states: the tensor has 4 dimensions, needs 2 ([rows, H]) or 3 (padded [B, S, H])",
                       seqpool::error);
  tensor gaps(rows.data(), float32, {2, 1, 4}, {12, 8, 1});
  CHECK(dlpack::hidden<float, host>(gaps.dl).stride(0) == 12);  // one row a sequence: rows 12 apart
  tensor gapped(rows.data(), float32, {2, 2, 4}, {12, 4, 1});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(gapped.dl)),
                       "hidden states: strides[0] is 12; padded sequences must follow one another, S·strides[1] = 8 "
                       "apart",
                       seqpool::error);
  tensor transposed(rows.data(), float32, {8, 3}, {1, 8});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(transposed.dl)),
                       "hidden states: strides[1] is 8; a row's elements must be adjacent (1)", seqpool::error);
  tensor overlapping(rows.data(), float32, {3, 8}, {4, 1});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(overlapping.dl)),
                       "hidden states: strides[0] is 4; rows must not overlap (at least 8)", seqpool::error);
  tensor negative(rows.data(), float32, {-1, 8});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(negative.dl)), "hidden states: shape[0] is negative: -1",
                       seqpool::error);
  tensor misaligned(rows.data(), float32, {2, 8});
  misaligned.dl.byte_offset = 2;
  CHECK_THROWS_WITH_AS(
      (dlpack::hidden<float, host>(misaligned.dl)),
      "hidden states: data + byte_offset is not aligned to 4 bytes (it is 2 more than a multiple of 4)",
      seqpool::error);
  // Where data itself is off the boundary (as the Python module hands a view over), the message says so too.
  misaligned.dl.byte_offset = 0;
  misaligned.dl.data = reinterpret_cast<std::byte*>(rows.data()) + 3;
  CHECK_THROWS_WITH_AS(
      (dlpack::hidden<float, host>(misaligned.dl)),
      "hidden states: data + byte_offset is not aligned to 4 bytes (it is 3 more than a multiple of 4)",
      seqpool::error);
}

TEST_CASE("hidden states of a batch: a [B, S, H] tensor has the batch's B requests and its S") {
  std::vector<float> rows(6 * 4);
  using host = seqpool::host_space;
  seqpool::batch padded_step;
  padded_step.requests.resize(2);
  padded_step.padded = seqpool::padded_rows{.sequence_length = 3};
  tensor right(rows.data(), float32, {2, 3, 4});
  const auto view = dlpack::hidden<float, host>(right.dl, padded_step);
  CHECK(view.extent(0) == 6);
  CHECK(view.stride(0) == 4);
  // The same rows flattened are the batch's too: the caller has said how they lie.
  tensor flat(rows.data(), float32, {6, 4});
  CHECK(dlpack::hidden<float, host>(flat.dl, padded_step).extent(0) == 6);
  // B and S swapped (the same six rows): each request's rows would be read across another's padding.
  tensor swapped(rows.data(), float32, {3, 2, 4});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(swapped.dl, padded_step)),
                       "hidden states: is [3, 2, 4], but the plan's padded batch is 2 sequences of 3 rows",
                       seqpool::error);
  int visited = 0;
  CHECK_THROWS_WITH_AS((dlpack::visit_hidden<host>(swapped.dl, padded_step, [&](auto) { ++visited; })),
                       "hidden states: is [3, 2, 4], but the plan's padded batch is 2 sequences of 3 rows",
                       seqpool::error);
  CHECK(visited == 0);
  dlpack::visit_hidden<host>(right.dl, padded_step, [&](auto seen) {
    CHECK(seen.extent(0) == 6);
    ++visited;
  });
  CHECK(visited == 1);
  DLManagedTensor managed{swapped.dl, nullptr, nullptr};
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(managed, padded_step)),
                       "hidden states: is [3, 2, 4], but the plan's padded batch is 2 sequences of 3 rows",
                       seqpool::error);
  seqpool::batch packed_step = padded_step;
  packed_step.padded.reset();
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(right.dl, packed_step)),
                       "hidden states: a [B, S, H] tensor is a padded batch's: give the batch a padded layout "
                       "(batch::padded), or its packed rows as [T, H]",
                       seqpool::error);
  CHECK(dlpack::hidden<float, host>(flat.dl, packed_step).extent(0) == 6);
}

TEST_CASE("output: contiguous, of the pooler's result type, of any shape; token ids: int64 or int32 on the host") {
  std::vector<float> out(12);
  tensor flat(out.data(), float32, {12});
  CHECK(dlpack::output<seqpool::host_space>(flat.dl).size() == 12);
  tensor matrix(out.data(), float32, {3, 4}, {4, 1});
  CHECK(dlpack::output<seqpool::host_space>(matrix.dl).data() == out.data());
  tensor strided(out.data(), float32, {3, 2}, {4, 1});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space>(strided.dl)),
                       "output: strides[0] is 4; the tensor must be contiguous (2)", seqpool::error);
  tensor half_out(out.data(), float16, {12});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space>(half_out.dl)),
                       "output: the tensor holds float16; the pooler writes float32", seqpool::error);
  // A pooler of 16-bit results writes a tensor of its type.
  CHECK(dlpack::output<seqpool::host_space, seqpool::half>(half_out.dl).size() == 12);
  CHECK(static_cast<void*>(dlpack::output<seqpool::host_space, __half>(half_out.dl).data()) == out.data());
  tensor bfloat16_out(out.data(), bfloat16, {2, 6});
  CHECK(dlpack::output<seqpool::host_space, seqpool::bfloat16>(bfloat16_out.dl).size() == 12);
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::half>(bfloat16_out.dl)),
                       "output: the tensor holds bfloat16; the pooler writes float16", seqpool::error);
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::bfloat16>(flat.dl)),
                       "output: the tensor holds float32; the pooler writes bfloat16", seqpool::error);
  // Quantized results: int8 tensors for int8 and binary, uint8 for uint8 and ubinary.
  tensor int8_out(out.data(), int8, {48});
  tensor uint8_out(out.data(), uint8, {4, 12});
  CHECK(dlpack::output<seqpool::host_space, std::int8_t>(int8_out.dl).size() == 48);
  CHECK(dlpack::output<seqpool::host_space, seqpool::binary>(int8_out.dl).size() == 48);
  CHECK(dlpack::output<seqpool::host_space, std::uint8_t>(uint8_out.dl).size() == 48);
  CHECK(static_cast<void*>(dlpack::output<seqpool::host_space, seqpool::ubinary>(uint8_out.dl).data()) == out.data());
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::ubinary>(int8_out.dl)),
                       "output: the tensor holds int8; the pooler writes uint8", seqpool::error);
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, std::int8_t>(uint8_out.dl)),
                       "output: the tensor holds uint8; the pooler writes int8", seqpool::error);
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, std::int8_t>(flat.dl)),
                       "output: the tensor holds float32; the pooler writes int8", seqpool::error);
  // Sparse results: int32 pairs, an entry's id and its weight's bits.
  tensor pairs(out.data(), int32, {3, 2});
  CHECK(dlpack::output<seqpool::host_space, seqpool::sparse_entry>(pairs.dl).size() == 3);
  CHECK(static_cast<void*>(dlpack::output<seqpool::host_space, seqpool::sparse_entry>(pairs.dl).data()) ==
        out.data());
  tensor flat_pairs(out.data(), int32, {2, 3, 2});
  CHECK(dlpack::output<seqpool::host_space, seqpool::sparse_entry>(flat_pairs.dl).size() == 6);
  tensor unpaired(out.data(), int32, {6});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::sparse_entry>(unpaired.dl)),
                       "output: shape [6]; sparse entries need a last extent of 2 (an id, then a weight's bits)",
                       seqpool::error);
  tensor no_dimensions(out.data(), int32, {});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::sparse_entry>(no_dimensions.dl)),
                       "output: shape []; sparse entries need a last extent of 2 (an id, then a weight's bits)",
                       seqpool::error);
  tensor float_pairs(out.data(), float32, {3, 2});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::sparse_entry>(float_pairs.dl)),
                       "output: the tensor holds float32; the pooler writes sparse entries, int32 pairs of an id "
                       "and a weight's bits",
                       seqpool::error);
  tensor strided_pairs(out.data(), int32, {2, 2}, {4, 1});
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space, seqpool::sparse_entry>(strided_pairs.dl)),
                       "output: strides[0] is 4; the tensor must be contiguous (2)", seqpool::error);

  std::vector<std::int64_t> wide{5, 6, 7};
  std::vector<std::int32_t> narrow{5, 6, 7};
  tensor wide_ids(wide.data(), int64, {3});
  tensor narrow_ids(narrow.data(), int32, {3});
  const seqpool::token_ids from_wide = dlpack::token_ids(wide_ids.dl), from_narrow = dlpack::token_ids(narrow_ids.dl);
  CHECK(from_wide.size() == 3);
  CHECK(from_narrow.size() == 3);
  CHECK(from_wide[2] == 7);
  CHECK(from_narrow[2] == 7);
  tensor float_ids(out.data(), float32, {3});
  CHECK_THROWS_WITH_AS((dlpack::token_ids(float_ids.dl)),
                       "token ids: the tensor holds float32; token ids are int64 or int32", seqpool::error);
  tensor gpu_ids(wide.data(), int64, {3}, {}, kDLCUDA);
  CHECK_THROWS_WITH_AS((dlpack::token_ids(gpu_ids.dl)),
                       "token ids: the tensor is on kDLCUDA, which host_space does not read; it needs kDLCPU or "
                       "kDLCUDAHost",
                       seqpool::error);
  tensor every_other(wide.data(), int64, {2}, {2});
  CHECK_THROWS_WITH_AS((dlpack::token_ids(every_other.dl)),
                       "token ids: strides[0] is 2; the tensor must be contiguous (1)", seqpool::error);
}

TEST_CASE("token ids of a batch: a [B, L] tensor, a row a request, its prompt the row's first ids") {
  using seqpool::task;
  seqpool::batch step{{test::whole("a", task::token_embed, 2), test::whole("b", task::token_embed, 5),
                       test::whole("c", task::token_embed, 3)}};
  // Padded as vLLM pads them: each row's ids, then the vocabulary's size.
  std::vector<std::int64_t> padded{1, 2, 9, 9, 9, 3, 4, 5, 6, 7, 8, 8, 8, 9, 9};
  tensor rows(padded.data(), int64, {3, 5});
  dlpack::assign_token_ids(rows.dl, step);
  const auto ids_of = [&](std::size_t k) {
    const seqpool::token_ids& ids = step.requests[k].prompt_token_ids;
    std::vector<std::int64_t> values;
    for (std::size_t i = 0; i < ids.size(); ++i) values.push_back(ids[i]);
    return values;
  };
  CHECK(ids_of(0) == std::vector<std::int64_t>{1, 2});
  CHECK(ids_of(1) == std::vector<std::int64_t>{3, 4, 5, 6, 7});
  CHECK(ids_of(2) == std::vector<std::int64_t>{8, 8, 8});
  // int32 rows of a wider buffer (vLLM's token_ids_cpu, [max_num_reqs, max_model_len]), sliced to 3 × 6.
  std::vector<std::int32_t> buffer(4 * 8);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::int32_t>(i);
  tensor slice(buffer.data(), int32, {3, 6}, {8, 1});
  dlpack::assign_token_ids(slice.dl, step);
  CHECK(ids_of(0) == std::vector<std::int64_t>{0, 1});
  CHECK(ids_of(1) == std::vector<std::int64_t>{8, 9, 10, 11, 12});
  CHECK(ids_of(2) == std::vector<std::int64_t>{16, 17, 18});
  versioned_tensor versioned{{1, 0}, nullptr, nullptr, 0, rows.dl};
  dlpack::assign_token_ids(versioned, step);
  CHECK(ids_of(1) == std::vector<std::int64_t>{3, 4, 5, 6, 7});
  seqpool::batch none;
  tensor no_rows(nullptr, int64, {0, 0});
  dlpack::assign_token_ids(no_rows.dl, none);

  const auto refuses = [&](const tensor& t, const char* message) {
    CHECK_THROWS_WITH_AS(dlpack::assign_token_ids(t.dl, step), message, seqpool::error);
  };
  refuses(tensor(padded.data(), int64, {15}),
          "token ids: the tensor has 1 dimensions, needs 2 ([B, L]: a row a request)");
  refuses(tensor(padded.data(), int64, {1, 3, 5}),
          "token ids: the tensor has 3 dimensions, needs 2 ([B, L]: a row a request)");
  refuses(tensor(padded.data(), int64, {5, 3}), "token ids: the tensor has 5 rows; the batch has 3 requests");
  refuses(tensor(padded.data(), int64, {3, -5}), "token ids: shape[1] is negative: -5");
  refuses(tensor(padded.data(), int64, {3, 5}, {5, 2}), "token ids: strides[1] is 2; a row's ids must be adjacent (1)");
  refuses(tensor(padded.data(), int64, {3, 5}, {4, 1}),
          "token ids: strides[0] is 4; rows must not overlap (at least 5)");
  refuses(tensor(padded.data(), int64, {3, 5}, {-5, 1}),
          "token ids: strides[0] is -5; rows must not overlap (at least 5)");
  refuses(tensor(padded.data(), float32, {3, 5}), "token ids: the tensor holds float32; token ids are int64 or int32");
  refuses(tensor(padded.data(), int64, {3, 5}, {}, kDLCUDA),
          "token ids: the tensor is on kDLCUDA, which host_space does not read; it needs kDLCPU or kDLCUDAHost");
  refuses(tensor(nullptr, int64, {3, 5}), "token ids: data is null; the tensor has 15 elements");
  refuses(tensor(padded.data(), int64, {3, 5}, {std::int64_t{1} << 61, 1}),
          "token ids: shape [3, 5], rows 2305843009213693952 ids apart: their bytes overflow int64 (8 an id)");
  // A row shorter than its request's prompt: no request's ids are changed.
  step.requests[0].prompt_token_ids = {};
  refuses(tensor(padded.data(), int64, {3, 4}),
          "request 1 (id \"b\"): prompt_token_ids: the tensor's rows hold 4 ids; the prompt has 5");
  CHECK(step.requests[0].prompt_token_ids.empty());
}

TEST_CASE("overflow: a shape whose elements or bytes overflow int64 is refused and named, never wrapped") {
  std::vector<float> rows(3 * 8);
  std::vector<std::int64_t> ids(3);
  using host = seqpool::host_space;
  constexpr std::int64_t two_32 = std::int64_t{1} << 32, two_40 = std::int64_t{1} << 40, two_62 = std::int64_t{1} << 62;
  SUBCASE("hidden states: B·S") {
    tensor wide(rows.data(), float32, {two_32, two_32, 8});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(wide.dl)),
                         "hidden states: shape [4294967296, 4294967296, 8]: B·S overflows int64", seqpool::error);
    tensor long_rows(rows.data(), float32, {3, two_62, 1});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(long_rows.dl)),
                         "hidden states: shape [3, 4611686018427387904, 1]: B·S overflows int64", seqpool::error);
    tensor cube(rows.data(), float32, {two_40, two_40, two_40});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(cube.dl)),
                         "hidden states: shape [1099511627776, 1099511627776, 1099511627776]: B·S overflows int64",
                         seqpool::error);
  }
  SUBCASE("hidden states: S·strides[1]") {
    tensor far_sequences(rows.data(), float32, {2, 4, 8}, {two_62, two_62, 1});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(far_sequences.dl)),
                         "hidden states: strides[1] is 4611686018427387904; S·strides[1] overflows int64",
                         seqpool::error);
  }
  SUBCASE("output: the product of the extents") {
    tensor wide(rows.data(), float32, {two_32, two_32, 8});
    CHECK_THROWS_WITH_AS((dlpack::output<host>(wide.dl)),
                         "output: shape [4294967296, 4294967296, 8]: the product of its extents overflows int64",
                         seqpool::error);
    tensor long_rows(rows.data(), float32, {3, two_62, 1});
    CHECK_THROWS_WITH_AS((dlpack::output<host>(long_rows.dl)),
                         "output: shape [3, 4611686018427387904, 1]: the product of its extents overflows int64",
                         seqpool::error);
    tensor cube(rows.data(), float32, {two_40, two_40, two_40});
    CHECK_THROWS_WITH_AS((dlpack::output<host>(cube.dl)),
                         "output: shape [1099511627776, 1099511627776, 1099511627776]: the product of its extents "
                         "overflows int64",
                         seqpool::error);
  }
  SUBCASE("every view: elements that int64 counts, bytes that it does not") {
    tensor many_rows(rows.data(), float32, {std::int64_t{1} << 59, 8});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(many_rows.dl)),
                         "hidden states: shape [576460752303423488, 8], rows 8 elements apart: their bytes overflow "
                         "int64 (4 an element)",
                         seqpool::error);
    tensor far_rows(rows.data(), float32, {2, 8}, {two_62, 1});
    CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(far_rows.dl)),
                         "hidden states: shape [2, 8], rows 4611686018427387904 elements apart: their bytes overflow "
                         "int64 (4 an element)",
                         seqpool::error);
    tensor long_output(rows.data(), float32, {two_62});
    CHECK_THROWS_WITH_AS((dlpack::output<host>(long_output.dl)),
                         "output: shape [4611686018427387904]: its bytes overflow int64 (4 an element)",
                         seqpool::error);
    tensor long_ids(ids.data(), int64, {std::int64_t{1} << 61});
    CHECK_THROWS_WITH_AS((dlpack::token_ids(long_ids.dl)),
                         "token ids: shape [2305843009213693952]: its bytes overflow int64 (8 an element)",
                         seqpool::error);
  }
}

TEST_CASE("null data: refused where the tensor has elements and taken where it has none") {
  using host = seqpool::host_space;
  tensor hidden(nullptr, float32, {3, 8});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(hidden.dl)),
                       "hidden states: data is null; the tensor has 24 elements", seqpool::error);
  tensor padded(nullptr, bfloat16, {2, 3, 4});
  CHECK_THROWS_WITH_AS((dlpack::visit_hidden<host>(padded.dl, [](auto) {})),
                       "hidden states: data is null; the tensor has 24 elements", seqpool::error);
  tensor out(nullptr, float32, {2, 6});
  CHECK_THROWS_WITH_AS((dlpack::output<host>(out.dl)), "output: data is null; the tensor has 12 elements",
                       seqpool::error);
  tensor scalar(nullptr, float32, {});
  CHECK_THROWS_WITH_AS((dlpack::output<host>(scalar.dl)), "output: data is null; the tensor has 1 elements",
                       seqpool::error);
  tensor pairs(nullptr, int32, {3, 2});  // three sparse entries: six int32
  CHECK_THROWS_WITH_AS((dlpack::output<host, seqpool::sparse_entry>(pairs.dl)),
                       "output: data is null; the tensor has 6 elements", seqpool::error);
  tensor ids(nullptr, int32, {3});
  CHECK_THROWS_WITH_AS((dlpack::token_ids(ids.dl)), "token ids: data is null; the tensor has 3 elements",
                       seqpool::error);
  // A framework's empty tensor may own no memory (PyTorch's data_ptr() is null): nothing is read or written.
  tensor no_rows(nullptr, float32, {0, 8});
  CHECK(dlpack::hidden<float, host>(no_rows.dl).extent(0) == 0);
  tensor no_sequences(nullptr, float32, {0, 3, 8});
  CHECK(dlpack::hidden<float, host>(no_sequences.dl).extent(0) == 0);
  tensor no_out(nullptr, float32, {0, 4});
  CHECK(dlpack::output<host>(no_out.dl).empty());
  tensor no_columns(nullptr, float32, {3, 0}, {1, 1});  // torch.empty(3, 0)'s strides: nothing to lay out
  CHECK(dlpack::output<host>(no_columns.dl).empty());
  tensor no_ids(nullptr, int64, {0});
  CHECK(dlpack::token_ids(no_ids.dl).size() == 0);
  // Nor are its strides read: torch.empty(0, 8)[:, ::2] has (8, 2), as the output's and the ids' may.
  tensor strided_rows(nullptr, float32, {0, 4}, {8, 2});
  CHECK(dlpack::hidden<float, host>(strided_rows.dl).extent(0) == 0);
  tensor crossed_columns(nullptr, float32, {3, 0}, {-1, 1});
  CHECK(dlpack::hidden<float, host>(crossed_columns.dl).extent(1) == 0);
  tensor strided_sequences(nullptr, float32, {2, 0, 4}, {0, 4, 2});
  CHECK(dlpack::hidden<float, host>(strided_sequences.dl).extent(0) == 0);
  seqpool::batch none;
  tensor strided_ids(nullptr, int64, {0, 3}, {3, 2});
  dlpack::assign_token_ids(strided_ids.dl, none);
}

TEST_CASE("ndim: the output has 0 dimensions or more, hidden states 2 or 3, token ids 1") {
  std::vector<float> out(12);
  std::vector<std::int64_t> ids(12);
  using host = seqpool::host_space;
  tensor scalar(out.data(), float32, {});
  CHECK(dlpack::output<host>(scalar.dl).size() == 1);
  tensor negative(out.data(), float32, {});
  negative.dl.ndim = -1;
  CHECK_THROWS_WITH_AS((dlpack::output<host>(negative.dl)), "output: the tensor has -1 dimensions, needs 0 or more",
                       seqpool::error);
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(negative.dl)),
                       "hidden states: the tensor has -1 dimensions, needs 2 ([rows, H]) or 3 (padded [B, S, H])",
                       seqpool::error);
  tensor flat(out.data(), float32, {12});
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, host>(flat.dl)),
                       "hidden states: the tensor has 1 dimensions, needs 2 ([rows, H]) or 3 (padded [B, S, H])",
                       seqpool::error);
  tensor no_ids(ids.data(), int64, {});
  CHECK_THROWS_WITH_AS((dlpack::token_ids(no_ids.dl)), "token ids: the tensor has 0 dimensions, needs 1",
                       seqpool::error);
  no_ids.dl.ndim = -1;
  CHECK_THROWS_WITH_AS((dlpack::token_ids(no_ids.dl)), "token ids: the tensor has -1 dimensions, needs 1",
                       seqpool::error);
  tensor id_rows(ids.data(), int64, {3, 4});
  CHECK_THROWS_WITH_AS((dlpack::token_ids(id_rows.dl)), "token ids: the tensor has 2 dimensions, needs 1",
                       seqpool::error);
}

TEST_CASE("managed tensors: DLManagedTensor and DLPack 1.x's versioned one") {
  std::vector<float> rows(2 * 4);
  tensor t(rows.data(), float32, {2, 4});
  DLManagedTensor managed{t.dl, nullptr, nullptr};
  CHECK(dlpack::hidden<float, seqpool::host_space>(managed).extent(0) == 2);
  versioned_tensor versioned{{1, 0}, nullptr, nullptr, 0, t.dl};
  CHECK(dlpack::hidden<float, seqpool::host_space>(versioned).extent(1) == 4);
  CHECK(dlpack::output<seqpool::host_space>(versioned).size() == 8);
  versioned.flags = 1;  // DLPACK_FLAG_BITMASK_READ_ONLY
  CHECK(dlpack::hidden<float, seqpool::host_space>(versioned).extent(0) == 2);
  CHECK_THROWS_WITH_AS((dlpack::output<seqpool::host_space>(versioned)), "output: the tensor is flagged read-only",
                       seqpool::error);
  versioned.version = {2, 1};
  CHECK_THROWS_WITH_AS((dlpack::hidden<float, seqpool::host_space>(versioned)),
                       "hidden states: DLPack version 2.1; seqpool reads 1.x", seqpool::error);
}

TEST_CASE_TEMPLATE("a step pooled from DLPack views equals the same step from seqpool's own", Space,
                   seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  // Two prompts of 3 and 2 rows in a [5, 4] bfloat16 slice of a [5, 6] tensor.
  constexpr std::int64_t hidden_size = 4, row_stride = 6;
  std::vector<seqpool::bfloat16> host_rows;
  for (int i = 0; i < 5 * row_stride; ++i) host_rows.push_back(seqpool::bfloat16(static_cast<float>(i % 7)));
  Space space;
  seqpool::buffer<seqpool::bfloat16, Space> rows(space, host_rows.size());
  space.copy_in(std::span<const seqpool::bfloat16>(host_rows), rows.span());
  seqpool::state_store<Space> state(space);
  seqpool::pooler<seqpool::method::mean, seqpool::head::embed, Space> pooler(space, hidden_size);
  const seqpool::batch step{{test::whole("a", seqpool::task::embed, 3, {.use_activation = false}),
                             test::whole("b", seqpool::task::embed, 2, {.use_activation = false})}};

  const auto pool = [&](auto hidden, cuda::std::span<float> out) {
    const auto plan = pooler.plan(step, state);
    pooler.reserve(plan, state);
    const seqpool::audit_scope audit(space.audit());
    pooler.forward(hidden, plan, state, out);
    CHECK(seqpool::keeps_sync_contract(audit.counts()));
    return plan;
  };
  seqpool::buffer<float, Space> expected_out(space, 8), dlpack_out(space, 8);
  pool(seqpool::make_hidden_view(rows.data(), 5, hidden_size, row_stride), expected_out.span());
  tensor hidden(rows.data(), bfloat16, {5, hidden_size}, {row_stride, 1});
  tensor out(dlpack_out.data(), float32, {2, hidden_size});
  dlpack::visit_hidden<Space>(hidden.dl, [&](auto view) { pool(view, dlpack::output<Space>(out.dl)); });

  std::vector<float> expected(8), actual(8);
  space.copy_out(cuda::std::span<const float>(expected_out.data(), 8), std::span<float>(expected));
  space.copy_out(cuda::std::span<const float>(dlpack_out.data(), 8), std::span<float>(actual));
  CHECK(actual == expected);
  CHECK(expected[0] == doctest::Approx((0 + 6 + 5) / 3.0));  // column 0 of rows 0, 1, 2: 0, 6, 12 % 7 = 5
}
