// Device kernels, sequence methods: every request's rows pooled in one launch.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/bulk_rows.hpp>
#include <seqpool/detail/device/rows.hpp>
#include <seqpool/detail/device/stream_rows.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/method/concepts.hpp>

namespace seqpool::detail::device {

/// Floats between the modes' columns of a split request's partial row in
/// the workspace, `loaded` each: each starts on a 16-byte boundary, so the
/// merge reads them in vectors.
SEQPOOL_HOST_DEVICE constexpr std::int64_t mode_stride(std::int64_t loaded) { return align_floats(loaded); }

/// Floats between a split request's partial rows: a mode_stride for each
/// mode whose columns its pooled row of `width` columns keeps (one, but for a concat's).
SEQPOOL_HOST_DEVICE constexpr std::int64_t partial_stride(std::int64_t width, std::int64_t loaded) {
  return (width + loaded - 1) / loaded * mode_stride(loaded);
}

/// One block per work record. A packed block pools up to `warps` short
/// requests, a warp each, whole: every lane reduces its vectors of the row over
/// all the rows, keeping `packed_vectors_in_flight` loads issued ahead, then the
/// method's finish and the head's epilogue run while the row is still in the
/// lanes' registers (where it is one strip wide). A split block reduces one slab
/// of columns of one tile of a long request, its warps taking neighbouring runs
/// of rows (through registers, or, where the policy says so, through a ring in
/// shared memory that bulk copies fill, a row's slab a copy: bulk_rows), and
/// writes a partial row; the last block of the slab to arrive
/// merges the partials in tile order, and the last slab of the row to arrive
/// runs the epilogue, the whole block on the row in memory (block_memory_row).
/// Every merge and every reduction of the epilogue has a fixed order, whichever
/// block arrives last, so results repeat bit for bit. The head's linear layer,
/// where there is one, is a launch of its own (apply_linear) over the pooled
/// rows this one leaves in the workspace. 16-bit results are rounded as a warp
/// stores them from its registers, or, drafted in the workspace (split
/// requests, wide rows), by the warp or block that runs the epilogue, which
/// encodes every quantized row (always drafted) the same way. A concat's
/// requests are split: a lane takes each value it loads into the same columns
/// of every mode, holding slab_lane_floats of each.
template <class Method, class Head, class T, class Result, class Policy>
struct pool_rows {
  static constexpr int threads = Policy::threads;
  /// A block an index: around this kernel, the loop of a one-wave grid costs
  /// the split path half the loads it keeps in flight (tests/sass_check.py).
  static constexpr bool one_wave = false;
  static constexpr int elements = vector_elements<T>;
  using layout = lane_layout<elements, Policy::lane_floats>;  ///< packed: how a warp's lanes hold a row
  static constexpr int lane_vectors = layout::vectors;
  static constexpr int slab_vectors = Policy::slab_lane_floats / elements;  ///< split: vectors a lane reads a row
  static constexpr int modes = modes_of<Method>;
  using lane_row = lane_fragment<Policy::lane_floats>;
  using lane_slab = lane_fragment<Policy::slab_lane_floats * modes>;  ///< mode S's floats from S × slab_lane_floats

  /// Split blocks reading in bulk: a ring a warp, of slots of a row's slab, in
  /// the static shared memory a block may have (48 KB, less what the block's
  /// barriers and reductions take) beside the merged runs; two slots at least,
  /// and a compiler that copies in bulk, or the rows go through registers.
  static constexpr std::int64_t slot_bytes = Policy::slab_columns * static_cast<std::int64_t>(sizeof(T));
  static constexpr std::int64_t ring_room =
      (48 * 1024 - 512 - static_cast<std::int64_t>(sizeof(lane_slab)) * Policy::warps * warp_lanes) / Policy::warps;
  /// 128: the line of the ring's barriers.
  static constexpr std::int64_t ring_slots =
      ((Policy::bulk_ring_bytes < ring_room ? Policy::bulk_ring_bytes : ring_room) - 128) / slot_bytes;
  static constexpr bool reads_in_bulk = Policy::split_rows_in_bulk && copies_in_bulk && ring_slots >= 2;
  using ring = bulk_ring<reads_in_bulk ? static_cast<int>(ring_slots) : 2, static_cast<int>(slot_bytes)>;

  struct shared_storage {
    lane_slab merged[Policy::warps][warp_lanes];  ///< each warp's rows of a split block, merged in warp order
    bulk_rings<reads_in_bulk ? Policy::warps : 0, ring> rings;
  };
  static_assert(sizeof(shared_storage) <= 48 * 1024 - 512,
                "seqpool: a split block merges its warps' runs of every mode of a concat in its static shared memory "
                "(48 KB, less its barriers' and reductions'), which holds five modes' at the default launch policy: "
                "join fewer modes on the device");

  Method method;
  Head head;
  const T* hidden;
  std::int64_t row_stride;
  bool rows_aligned;    ///< every row starts on a 16-byte boundary: whole vectors load in one instruction
  const std::byte* image;  ///< the share's image on the device
  Result* output;
  float* workspace;
  int* arrivals;
  result_encoding<Result> encoding;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    const work_record work = first_records<work_record>(image)[index];  // its address needs no header field
    if (index >= static_cast<std::int64_t>(header.works.count)) return;
    if (work.slab < 0) {
      block.warps([&](const auto& warp) {
        for (int t = warp.index; t < work.count; t += Policy::warps) pool_whole(warp, header, work.first + t);
      });
    } else {
      pool_slab(block, header, work, shared);
    }
  }

 private:
  SEQPOOL_HOST_DEVICE step_memory<Result> memory(const image_header& header) const {
    return {output, workspace, header.state_table.in(image), encoding};
  }

  /// The value a column ends with: the reduction of the rows read (none, for a
  /// request that finishes from its state alone) after the state a chunked
  /// request brings, then the finish of `reducing` (the method, or a concat's mode) when the request finishes.
  template <class Reducing>
  SEQPOOL_HOST_DEVICE static float column_value(const Reducing& reducing, float pooled, bool read_rows,
                                                const float* init, std::int64_t column, const request_record& owner) {
    float value = pooled;
    if (init != nullptr) value = read_rows ? reducing.merge(init[column], pooled) : init[column];
    return (owner.flags & finish) != 0 ? reducing.finish(value, owner.prompt_len) : value;
  }

  // Packed blocks.

  /// Request record `index`, its rows the ones its entry names.
  template <class Warp>
  SEQPOOL_HOST_DEVICE void pool_whole(const Warp& warp, const image_header& header, std::int32_t index) const {
    const request_table requests = requests_of(header, image);
    const request_entry entry = requests.entries[index];
    const request_record owner = requests.of(entry);
    const step_memory<Result> step = memory(header);
    const float* init = (owner.flags & from_state) != 0 ? step.state[entry.detail] : nullptr;
    held_result<Result>* rounded = nullptr;
    if constexpr (!std::is_same_v<held_result<Result>, float>)
      if (owner.where == target::output) rounded = step.output + owner.offset;
    pool_whole_into(
        warp, entry, owner, init,
        warp_result<Warp, elements, Policy::lane_floats, Policy::warp_row_vectors_in_flight, held_result<Result>>{
            step.at(owner.where, owner.offset, entry.detail), rounded, owner.width, (owner.flags & epilogue) != 0});
    if ((owner.flags & drafted) != 0)
      encode_into<Policy::warp_row_vectors_in_flight>(warp, step.output + owner.result, step.workspace + owner.offset,
                                                      owner.width, encoding);
  }

  template <class Warp, class Destination>
  SEQPOOL_HOST_DEVICE void pool_whole_into(const Warp& warp, const request_entry& entry, const request_record& owner,
                                           const float* init, const Destination& result) const {
    const T* rows = hidden + std::int64_t{entry.row_begin} * row_stride;
    const std::int64_t width = entry.width;
    typename Warp::template values<lane_row> held;
    for (std::int64_t strip = 0; strip < width; strip += layout::strip_columns) {
      warp.lanes([&](int lane) {
        lane_row& mine = held[lane];
        reduce_whole(rows, entry.rows, entry.row_begin + owner.position_offset, width, strip, lane, mine);
        SEQPOOL_UNROLL
        for (int i = 0; i < Policy::lane_floats; ++i) {
          const std::int64_t column = layout::column(strip, lane, i);
          if (column < width)
            mine.at[i] = column_value(mode_of<0>(method), mine.at[i], entry.rows > 0, init, column, owner);
        }
        result.strip_done(mine, strip, lane);
      });
    }
    result.finish(warp, head, owner.knobs, held);
  }

  /// A packed lane's vectors of one strip, reduced over `count` rows from identity();
  /// the first row sits at `first_position` of its prompt. A packed request's row is one mode's.
  SEQPOOL_HOST_DEVICE void reduce_whole(const T* rows, std::int64_t count, std::int64_t first_position,
                                        std::int64_t width, std::int64_t strip, int lane, lane_row& mine) const {
    SEQPOOL_UNROLL
    for (int i = 0; i < Policy::lane_floats; ++i) mine.at[i] = mode_of<0>(method).identity();
    // The lane's last vector is its farthest: if it is whole, they all are.
    if (rows_aligned && layout::column(strip, lane, Policy::lane_floats - 1) < width) {
      constexpr int stage_rows = Policy::packed_vectors_in_flight > lane_vectors
                                     ? Policy::packed_vectors_in_flight / lane_vectors
                                     : 1;
      stream_rows<stage_rows, Policy::load_stages, lane_vectors>(
          0, count,
          [&](std::int64_t r, raw_vector (&into)[lane_vectors]) {
            SEQPOOL_UNROLL
            for (int k = 0; k < lane_vectors; ++k)
              into[k] = load_once(rows + r * row_stride + layout::column(strip, lane, k * elements));
          },
          [&](std::int64_t r, const raw_vector (&loaded)[lane_vectors]) {
            accumulate_vectors<lane_vectors, 1>(loaded, mine.at, first_position + r);
          });
      return;
    }
    for (std::int64_t r = 0; r < count; ++r)
      SEQPOOL_UNROLL
      for (int k = 0; k < lane_vectors; ++k)
        accumulate_columns<1, 0>(rows + r * row_stride, layout::column(strip, lane, k * elements), width,
                                 mine.at + k * elements, first_position + r);
  }

  /// One row's loaded vectors taken into `values`, into the floats of each of
  /// the first `Modes` modes, which lie Vectors × elements apart; the row
  /// sits at `position` of its prompt.
  template <int Vectors, int Modes>
  SEQPOOL_HOST_DEVICE void accumulate_vectors(const raw_vector (&loaded)[Vectors], float* values,
                                              std::int64_t position) const {
    SEQPOOL_UNROLL
    for (int k = 0; k < Vectors; ++k) {
      float row[elements];
      to_floats<T>(loaded[k], row);
      for_modes<Modes>([&]<int S>() {
        float* into = values + S * (Vectors * elements) + k * elements;
        SEQPOOL_UNROLL
        for (int e = 0; e < elements; ++e) into[e] = accumulate_at(mode_of<S>(method), into[e], row[e], position);
      });
    }
  }

  /// One vector's columns from `column` of one row, where a vector load cannot
  /// take them (an unaligned row, or past the row's last whole vector), into
  /// the floats of each of the first `Modes` modes in `values`, `Apart` apart.
  template <int Modes, int Apart>
  SEQPOOL_HOST_DEVICE void accumulate_columns(const T* row, std::int64_t column, std::int64_t width, float* values,
                                              std::int64_t position) const {
    const std::int64_t count = width - column;
    if (count <= 0) return;
    float loaded[elements] = {};  // the columns past `count` stay unread
    if (rows_aligned && count >= elements)
      to_floats<T>(load_once(row + column), loaded);
    else
      load_columns<elements>(row, column, count, loaded);
    for_modes<Modes>([&]<int S>() {
      float* into = values + S * Apart;
      SEQPOOL_UNROLL
      for (int e = 0; e < elements; ++e)
        if (e < count) into[e] = accumulate_at(mode_of<S>(method), into[e], loaded[e], position);
    });
  }

  // Split blocks.

  template <class Block>
  SEQPOOL_HOST_DEVICE void pool_slab(const Block& block, const image_header& header, const work_record work,
                                     shared_storage& shared) const {
    const tile_record tile = header.tiles.in(image)[work.first];
    const request_record owner = header.details.in(image)[tile.request];  // a split request's tiles name its detail
    const step_memory<Result> step = memory(header);
    float* out = step.at(owner.where, owner.offset, tile.request);  // drafted results: the row they are encoded from
    const float* init = (owner.flags & from_state) != 0 ? step.state[tile.request] : nullptr;
    const std::int64_t width = tile.width;  // the columns read of each row: a mode's
    const std::int64_t slab_begin = work.slab * Policy::slab_columns;

    // Each warp reduces a run of neighbouring rows; warp 0 merges the runs in order.
    const std::int64_t run = (tile.rows + Policy::warps - 1) / Policy::warps;
    const T* rows = hidden + tile.row_begin * row_stride;
    const std::int64_t first_position = tile.row_begin + owner.position_offset;
    const auto run_of = [&](int warp, auto&& reduce) {
      const std::int64_t begin = warp * run;
      reduce(begin, begin + run < tile.rows ? begin + run : tile.rows);
    };
    if (in_bulk(width, slab_begin)) {
      block.warps([&](const auto& warp) {
        run_of(warp.index, [&](std::int64_t begin, std::int64_t end) {
          reduce_slab_in_bulk(warp, rows, begin, end, first_position, width, slab_begin, shared);
        });
      });
    } else {
      block.threads([&](int warp, int lane) {
        run_of(warp, [&](std::int64_t begin, std::int64_t end) {
          reduce_slab(rows, begin, end, first_position, width, slab_begin + lane * Policy::slab_lane_floats,
                      shared.merged[warp][lane]);
        });
      });
    }
    block.sync();
    const bool alone = owner.num_tiles == 1;
    float* partial = workspace + owner.partials + tile.index * tile_stride(owner.width, width);
    block.threads([&](int warp, int lane) {
      if (warp != 0) return;
      lane_slab& mine = merge_runs(shared, lane, tile.rows, run);
      const std::int64_t column = slab_begin + lane * Policy::slab_lane_floats;
      if (alone) {
        store_slab(out, width, mine, init, column, width, owner, tile.rows > 0 ? read : from_state_alone);
      } else {
        store_slab(partial, mode_stride(width), mine, nullptr, column, width, owner, partial_row);
      }
    });

    if (!alone) {
      if (!block.arrive_last(arrivals + owner.arrivals + work.slab, owner.num_tiles)) return;
      // The last tile of the slab: the partials of every tile, merged in tile order.
      const std::int64_t share = (owner.num_tiles + Policy::warps - 1) / Policy::warps;
      block.threads([&](int warp, int lane) {
        const std::int64_t first = warp * share;
        const std::int64_t last = first + share < owner.num_tiles ? first + share : owner.num_tiles;
        merge_partials(first, last, slab_begin + lane * Policy::slab_lane_floats, width, owner,
                       shared.merged[warp][lane]);
      });
      block.sync();
      block.threads([&](int warp, int lane) {
        if (warp != 0) return;
        lane_slab& mine = merge_runs(shared, lane, owner.num_tiles, share);
        store_slab(out, width, mine, init, slab_begin + lane * Policy::slab_lane_floats, width, owner, read);
      });
    }

    if ((owner.flags & epilogue) == 0) return;
    const std::int64_t slabs = (width + Policy::slab_columns - 1) / Policy::slab_columns;
    if (slabs > 1) {
      if (!block.arrive_last(arrivals + owner.arrivals + slabs, static_cast<int>(slabs))) return;
    } else {
      block.sync();
    }
    block_memory_row<Block, threads, Policy::block_row_vectors_in_flight> row{block, out, owner.width};
    head.epilogue(row, owner.knobs);
    if ((owner.flags & drafted) != 0) row.encode_into(step.output + owner.result, encoding);
  }

  /// Floats between a split request's partial rows, whose pooled row has
  /// `width` columns, `loaded` of them a mode's (partial_stride).
  SEQPOOL_HOST_DEVICE static std::int64_t tile_stride(std::int64_t width, std::int64_t loaded) {
    if constexpr (modes == 1)
      return mode_stride(loaded);  // the row is its one mode's
    else
      return partial_stride(width, loaded);
  }

  /// The columns mode S keeps of the `loaded` a lane's slab covers: all of
  /// them but in a row cut short (matryoshka truncation) to `width`.
  template <int S>
  SEQPOOL_HOST_DEVICE static std::int64_t kept_columns(std::int64_t width, std::int64_t loaded) {
    if constexpr (S == 0) {
      return loaded;
    } else {
      const std::int64_t rest = width - S * loaded;
      return rest < loaded ? rest : loaded;
    }
  }

  /// Warp 0's lane after merging, in order, every warp's run that held rows.
  SEQPOOL_HOST_DEVICE lane_slab& merge_runs(shared_storage& shared, int lane, std::int64_t count,
                                            std::int64_t run) const {
    lane_slab& mine = shared.merged[0][lane];
    for (int other = 1; other < Policy::warps && other * run < count; ++other)
      for_modes<modes>([&]<int S>() {
        constexpr int first = S * Policy::slab_lane_floats;
        SEQPOOL_UNROLL
        for (int i = first; i < first + Policy::slab_lane_floats; ++i)
          mine.at[i] = mode_of<S>(method).merge(mine.at[i], shared.merged[other][lane].at[i]);
      });
    return mine;
  }

  /// Partials [first, last) of a split request's slab merged into a lane's
  /// columns from `column` of each mode, in order, `merged_partials_in_flight`
  /// partials loaded at once: a warp's share of the merge costs a round trip to
  /// L2 for each group of them, not for each partial. Columns past a mode's read 0.
  SEQPOOL_HOST_DEVICE void merge_partials(std::int64_t first, std::int64_t last, std::int64_t column,
                                          std::int64_t loaded, const request_record& owner, lane_slab& mine) const {
    constexpr int group = Policy::merged_partials_in_flight;
    constexpr int lane_floats = Policy::slab_lane_floats;
    static_assert(lane_floats % 4 == 0, "a lane's columns of a slab are whole vectors of floats");
    const std::int64_t stride = tile_stride(owner.width, loaded);
    for_modes<modes>([&]<int S>() {
      const std::int64_t kept = kept_columns<S>(owner.width, loaded);
      const float* partials = workspace + owner.partials + S * mode_stride(loaded) + column;
      float* merged = mine.at + S * lane_floats;
      // A mode's columns start on a 16-byte boundary and `column` is a multiple of
      // the lane's floats, so a lane whose columns lie within it loads vectors.
      const bool whole = column + lane_floats <= kept;
      for (std::int64_t p = first; p < last; p += group) {
        float loaded_values[group][lane_floats];
        SEQPOOL_UNROLL
        for (int g = 0; g < group; ++g) {
          if (p + g >= last) continue;
          const float* row = partials + (p + g) * stride;
          if (whole) {
            SEQPOOL_UNROLL
            for (int v = 0; v < lane_floats / 4; ++v) to_floats<float>(load_fresh(row + 4 * v), loaded_values[g] + 4 * v);
          } else {
            SEQPOOL_UNROLL
            for (int i = 0; i < lane_floats; ++i) loaded_values[g][i] = column + i < kept ? read_fresh(row + i) : 0.0f;
          }
        }
        SEQPOOL_UNROLL
        for (int g = 0; g < group; ++g) {
          if (p + g >= last) continue;
          SEQPOOL_UNROLL
          for (int i = 0; i < lane_floats; ++i)
            merged[i] = p + g == first ? loaded_values[g][i]
                                       : mode_of<S>(method).merge(merged[i], loaded_values[g][i]);
        }
      }
    });
  }

  /// A split lane's columns of every mode, before any row: each mode's identity.
  SEQPOOL_HOST_DEVICE void start_slab(lane_slab& mine) const {
    for_modes<modes>([&]<int S>() {
      SEQPOOL_UNROLL
      for (int i = 0; i < Policy::slab_lane_floats; ++i)
        mine.at[S * Policy::slab_lane_floats + i] = mode_of<S>(method).identity();
    });
  }

  /// A split lane's columns [column, column + slab_lane_floats) reduced over rows [begin, end)
  /// of a tile whose first row sits at `first_position` of its prompt, into every mode's.
  SEQPOOL_HOST_DEVICE void reduce_slab(const T* rows, std::int64_t begin, std::int64_t end, std::int64_t first_position,
                                       std::int64_t width, std::int64_t column, lane_slab& mine) const {
    start_slab(mine);
    if (rows_aligned && column + Policy::slab_lane_floats <= width) {
      stream_rows<Policy::split_rows_in_flight, Policy::load_stages, slab_vectors>(
          begin, end,
          [&](std::int64_t r, raw_vector (&into)[slab_vectors]) {
            SEQPOOL_UNROLL
            for (int k = 0; k < slab_vectors; ++k) into[k] = load_once(rows + r * row_stride + column + k * elements);
          },
          [&](std::int64_t r, const raw_vector (&loaded)[slab_vectors]) {
            accumulate_vectors<slab_vectors, modes>(loaded, mine.at, first_position + r);
          });
      return;
    }
    for (std::int64_t r = begin; r < end; ++r)
      SEQPOOL_UNROLL
      for (int k = 0; k < slab_vectors; ++k)
        accumulate_columns<modes, Policy::slab_lane_floats>(rows + r * row_stride, column + k * elements, width,
                                                                mine.at + k * elements, first_position + r);
  }

  /// The columns of a row of `width` that the slab from `slab_begin` covers.
  SEQPOOL_HOST_DEVICE static std::int64_t slab_width(std::int64_t width, std::int64_t slab_begin) {
    return width - slab_begin < Policy::slab_columns ? width - slab_begin : Policy::slab_columns;
  }

  /// Whether a split block reads its slab's rows in bulk: where the kernel
  /// does (reads_in_bulk), each row's slab whole 16-byte pieces from a
  /// 16-byte boundary.
  SEQPOOL_HOST_DEVICE bool in_bulk(std::int64_t width, std::int64_t slab_begin) const {
    if constexpr (reads_in_bulk) {
      return rows_aligned && slab_width(width, slab_begin) % elements == 0;
    } else {
      return false;
    }
  }

  /// A warp's run [begin, end) of a split tile's rows reduced into its lanes'
  /// columns of the slab from `slab_begin`, read through the warp's ring: each
  /// lane takes its vectors of every row from the row's slot, in order, as
  /// reduce_slab takes them from its loads (the same sums), then leaves them
  /// in shared.merged for the merge of the runs. A lane past the `columns`
  /// the copies bring reads nothing; one whose last vector lies past them
  /// takes its first vector again in its place (columns past the row's width,
  /// which no store writes).
  template <class Warp>
  SEQPOOL_HOST_DEVICE void reduce_slab_in_bulk(const Warp& warp, const T* rows, std::int64_t begin, std::int64_t end,
                                               std::int64_t first_position, std::int64_t width, std::int64_t slab_begin,
                                               shared_storage& shared) const {
    if constexpr (reads_in_bulk) {  // in_bulk() is false otherwise
      static_assert(8 % slab_vectors == 0, "a quarter warp's lanes take turns a vector at a time");
      const std::int64_t columns = slab_width(width, slab_begin);
      typename Warp::template values<lane_slab> held;
      warp.lanes([&](int lane) { start_slab(held[lane]); });
      bulk_rows(warp, shared.rings.of_warp[warp.index], reinterpret_cast<const std::byte*>(rows + slab_begin),
                row_stride * static_cast<std::int64_t>(sizeof(T)), static_cast<std::uint32_t>(columns * sizeof(T)),
                begin, end, [&](int lane, std::int64_t r, const std::byte* slot) {
                  const std::int64_t column = lane * Policy::slab_lane_floats;
                  if (column >= columns) return;
                  // A lane's vectors lie side by side: read in one order by every lane,
                  // the 16-byte reads of a quarter warp (which shared memory serves
                  // together) would fall twice on each bank. Each group of
                  // 8 / slab_vectors lanes starts a vector later, so they fall once.
                  const int turn = slab_vectors > 1 ? lane / (8 / slab_vectors) % slab_vectors : 0;
                  raw_vector fetched[slab_vectors];
                  SEQPOOL_UNROLL
                  for (int k = 0; k < slab_vectors; ++k) {
                    const std::int64_t at = column + (k + turn) % slab_vectors * elements;
                    fetched[k] =
                        load_shared(slot + (at < columns ? at : column) * static_cast<std::int64_t>(sizeof(T)));
                  }
                  // Back in the lane's order, a word at a time: selects, in registers.
                  raw_vector loaded[slab_vectors];
                  SEQPOOL_UNROLL
                  for (int v = 0; v < slab_vectors; ++v) {
                    SEQPOOL_UNROLL
                    for (int w = 0; w < vector_bytes / 4; ++w) {
                      std::uint32_t word = fetched[0].words[w];
                      SEQPOOL_UNROLL
                      for (int k = 1; k < slab_vectors; ++k)
                        word = (k + turn) % slab_vectors == v ? fetched[k].words[w] : word;
                      loaded[v].words[w] = word;
                    }
                  }
                  accumulate_vectors<slab_vectors, modes>(loaded, held[lane].at, first_position + r);
                });
      warp.lanes([&](int lane) { shared.merged[warp.index][lane] = held[lane]; });
    }
  }

  /// What a lane's columns of a slab are when they are stored.
  enum slab_values : std::uint8_t {
    partial_row,       ///< a tile's reduction, as it is, for the merge
    read,              ///< the request's reduction of the rows read: completed (merged with its state, finished)
    from_state_alone,  ///< no rows read (a concat's request that finishes from its state): its state, finished
  };

  /// Writes a split lane's columns of each mode to `to`, the modes'
  /// `apart` floats apart: completed for the request's destination, where
  /// they lie `loaded` apart, as they are for a partial row.
  SEQPOOL_HOST_DEVICE void store_slab(float* to, std::int64_t apart, lane_slab& mine, const float* init,
                                      std::int64_t column, std::int64_t loaded, const request_record& owner,
                                      slab_values stored) const {
    for_modes<modes>([&]<int S>() {
      const std::int64_t count = kept_columns<S>(owner.width, loaded) - column;
      if (count <= 0) return;
      float* values = mine.at + S * Policy::slab_lane_floats;
      if (stored != partial_row)
        SEQPOOL_UNROLL
        for (int i = 0; i < Policy::slab_lane_floats; ++i)
          if (i < count)
            values[i] = column_value(mode_of<S>(method), values[i], stored == read, init,
                                     S * loaded + column + i, owner);
      float* at = to + S * apart + column;
      store_values<Policy::slab_lane_floats>(at, values, count, is_aligned(at));
    });
  }
};

}  // namespace seqpool::detail::device
