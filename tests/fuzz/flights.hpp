// What the differential fuzz targets share: the requests in flight over a run
// of steps, a step drawn from them, its run on both spaces, and the comparison
// of float results.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include <seqpool/batch.hpp>

#include "../support/step.hpp"

namespace fuzz {

/// A request over the steps it takes: its whole prompt's rows and ids, and the
/// rows its chunks have given so far.
struct flight {
  seqpool::request r;
  std::vector<float> prompt;
  std::vector<std::int64_t> ids;
  std::int64_t done = 0;
};

/// A new flight, its knobs and id left to the caller: a prompt of 1 to 40
/// rows, values quarters in [-4, 4] (sums a float holds exactly), token ids in
/// [0, most_id].
inline flight& add_flight(FuzzedDataProvider& in, std::vector<flight>& flights, std::int64_t hidden_size, int most_id) {
  flight& f = flights.emplace_back();
  f.r.prompt_len = in.ConsumeIntegralInRange<std::int64_t>(1, 40);
  for (std::int64_t i = 0; i < f.r.prompt_len * hidden_size; ++i)
    f.prompt.push_back(static_cast<float>(in.ConsumeIntegralInRange(-16, 16)) / 4);
  for (std::int64_t t = 0; t < f.r.prompt_len; ++t) f.ids.push_back(in.ConsumeIntegralInRange(0, most_id));
  return f;
}

/// A step drawn from the flights: its batch, its hidden states, and the flight
/// of each of its requests.
struct drawn_step {
  seqpool::batch batch;
  std::vector<float> rows;
  std::vector<flight*> scheduled;
};

/// Each flight not done takes a chunk now and then (now and then a wrong one,
/// on a request whose id no other flight shares: one that does share it could
/// rightly continue the other's state), its rows packed, or now and then padded
/// [B, S, H] (S short of a chunk now and then), each padding row `padding_row`,
/// which no result survives reading.
inline drawn_step draw_step(FuzzedDataProvider& in, std::vector<flight>& flights, std::int64_t hidden_size,
                            const std::vector<float>& padding_row) {
  drawn_step step;
  std::vector<std::vector<float>> chunk_rows;  // each scheduled request's rows of this step
  for (flight& f : flights) {
    if (f.done == f.r.prompt_len || !in.ConsumeBool()) continue;
    seqpool::request r = f.r;
    if (f.done > 0) r.id = seqpool::request_id(r.id.str());  // a later chunk gives an integer id as its text
    const bool wrong = in.ConsumeIntegralInRange(0, 15) == 0 && f.r.id != "dup";
    r.num_computed = f.done + (wrong ? 1 : 0);
    r.num_scheduled = in.ConsumeIntegralInRange<std::int64_t>(1, f.r.prompt_len - f.done);
    r.prompt_token_ids = f.ids;
    step.batch.requests.push_back(r);
    chunk_rows.emplace_back(f.prompt.begin() + f.done * hidden_size,
                            f.prompt.begin() + std::min(f.done + r.num_scheduled, f.r.prompt_len) * hidden_size);
    step.scheduled.push_back(&f);
  }
  std::vector<seqpool::request>& requests = step.batch.requests;
  if (requests.empty() || in.ConsumeIntegralInRange(0, 3) != 0) {
    for (const std::vector<float>& part : chunk_rows) step.rows.insert(step.rows.end(), part.begin(), part.end());
    return step;
  }
  std::int64_t longest = 0;
  for (const seqpool::request& r : requests) longest = std::max(longest, r.num_scheduled);
  const std::int64_t length = std::max<std::int64_t>(1, longest + in.ConsumeIntegralInRange<std::int64_t>(-1, 2));
  const bool left = in.ConsumeBool();
  step.batch.padded = seqpool::padded_rows{length, left ? seqpool::padding::left : seqpool::padding::right};
  for (std::size_t row = 0; row < requests.size() * static_cast<std::size_t>(length); ++row)
    step.rows.insert(step.rows.end(), padding_row.begin(), padding_row.end());
  for (std::size_t i = 0; i < chunk_rows.size(); ++i) {
    const std::int64_t first = left ? std::max<std::int64_t>(0, length - requests[i].num_scheduled) : 0;
    const std::size_t room = static_cast<std::size_t>((length - first) * hidden_size);
    std::copy_n(
        chunk_rows[i].begin(), std::min(room, chunk_rows[i].size()),
        step.rows.begin() + static_cast<std::ptrdiff_t>((static_cast<std::int64_t>(i) * length + first) * hidden_size));
  }
  return step;
}

/// A step run by both spaces' engines (each `run()` gives its results, or
/// none and the error's message): their results, none where both refused it;
/// `mismatch` is told where one refused it and the other did not, or both
/// with different messages. A step both ran moves its flights on by their chunks.
template <class Host, class Device, class Mismatch>
auto run_both(Host& host, Device& device, const drawn_step& step, std::int64_t hidden_size, Mismatch mismatch) {
  auto [host_results, host_error] = host.run(step.batch, step.rows, hidden_size);
  auto [device_results, device_error] = device.run(step.batch, step.rows, hidden_size);
  if (host_error != device_error) mismatch("the spaces disagree: \"" + host_error + "\" / \"" + device_error + "\"");
  if (host_results)
    for (std::size_t i = 0; i < step.scheduled.size(); ++i)
      step.scheduled[i]->done += step.batch.requests[i].num_scheduled;
  return std::pair(std::move(host_results), std::move(device_results));
}

/// Whether `actual` is `expected` but for float rounding.
inline bool close(const test::matrix& actual, const test::matrix& expected) {
  if (actual.rows != expected.rows || actual.cols != expected.cols || actual.values.size() != expected.values.size())
    return false;
  for (std::size_t i = 0; i < expected.values.size(); ++i)
    if (!(std::abs(actual.values[i] - expected.values[i]) <= 1e-4 * std::max(1.0f, std::abs(expected.values[i]))))
      return false;  // a NaN is close to nothing
  return true;
}

}  // namespace fuzz
