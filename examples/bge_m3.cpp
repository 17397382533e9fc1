// BGE-M3's three outputs of one forward pass — the dense embedding, the sparse
// lexical weights and the ColBERT vectors — from one multi_pooler, for queries
// and documents an engine schedules under a token budget, so that long
// documents arrive in chunks over several steps. A plain loop computes the same
// maths as FlagEmbedding's BGEM3FlagModel.encode and checks every result.
//
// The weights have BGE-M3's shapes (hidden size 1024, sparse_linear [1, 1024],
// colbert_linear [1024, 1024], each with a bias) and are drawn here, so nothing
// is downloaded: an engine hands in its checkpoint's the same way. The ids are
// XLM-RoBERTa's: CLS 0, PAD 1, EOS 2, UNK 3.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <seqpool/seqpool.hpp>

namespace {

namespace method = seqpool::method;
namespace head = seqpool::head;
using element = seqpool::bfloat16;

constexpr std::int64_t hidden_size = 1024;
constexpr std::int64_t colbert_dims = 1024;
constexpr std::int64_t token_budget = 256;  // rows of hidden states per step
constexpr std::int64_t cls_id = 0, pad_id = 1, eos_id = 2, unk_id = 3;

float to_float(element value) { return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16); }

/// A query or document: its token ids (CLS … EOS) and the last layer's rows for them.
struct text {
  std::string id;
  std::vector<std::int64_t> token_ids;
  std::vector<element> hidden;  // [token_ids.size(), hidden_size]
  std::int64_t done = 0;
};

/// Six short queries and six documents of up to 700 words (and CLS and EOS); ids drawn from a
/// few hundred so that a text repeats some, with the odd UNK.
std::vector<text> make_texts() {
  std::mt19937 random(17);
  std::normal_distribution<float> activation(0.0f, 1.0f);
  std::vector<text> texts;
  for (int i = 0; i < 12; ++i) {
    const bool query = i % 2 == 0;
    text t;
    t.id = (query ? "query-" : "doc-") + std::to_string(i / 2);
    const std::int64_t words = std::uniform_int_distribution<std::int64_t>(query ? 4 : 60, query ? 24 : 700)(random);
    t.token_ids.push_back(cls_id);
    for (std::int64_t w = 0; w < words; ++w)
      t.token_ids.push_back(w % 97 == 13 ? unk_id : std::uniform_int_distribution<std::int64_t>(4, 400)(random));
    t.token_ids.push_back(eos_id);
    for (std::size_t r = 0; r < t.token_ids.size() * hidden_size; ++r) t.hidden.push_back(element(activation(random)));
    texts.push_back(std::move(t));
  }
  return texts;
}

/// The model's pooling layers, on the host.
struct m3_weights {
  std::vector<float> sparse_weight, sparse_bias, colbert_weight, colbert_bias;
};

m3_weights make_weights() {
  std::mt19937 random(23);
  std::normal_distribution<float> draw(0.0f, 0.03f);
  m3_weights w{std::vector<float>(hidden_size),
               {0.1f},
               std::vector<float>(colbert_dims * hidden_size),
               std::vector<float>(colbert_dims)};
  for (auto* values : {&w.sparse_weight, &w.colbert_weight, &w.colbert_bias})
    for (float& value : *values) value = draw(random);
  return w;
}

/// A text's three outputs.
struct m3_output {
  std::vector<float> dense;              // [hidden_size], unit length
  std::map<std::int64_t, float> sparse;  // token id → weight
  std::vector<float> colbert;            // [tokens − 1, colbert_dims], each row unit length
};

void normalise(std::span<float> row) {
  double norm = 0;
  for (const float value : row) norm += static_cast<double>(value) * value;
  for (float& value : row) value = static_cast<float>(value / std::max(std::sqrt(norm), 1e-12));
}

/// What BGEM3FlagModel.encode returns for a text, by plain loops: the CLS row
/// normalised; relu(sparse_linear(h_t)) of every token, each id's largest,
/// leaving out the special tokens and keeping w > 0 (_process_token_weights);
/// colbert_linear of every token but the first (last_hidden_state[:, 1:]), each
/// normalised.
m3_output flag_embedding(const text& t, const m3_weights& w) {
  const auto row = [&](std::size_t token, std::int64_t c) { return to_float(t.hidden[token * hidden_size + c]); };
  m3_output out;
  for (std::int64_t c = 0; c < hidden_size; ++c) out.dense.push_back(row(0, c));
  normalise(out.dense);
  for (std::size_t token = 0; token < t.token_ids.size(); ++token) {
    double dot = w.sparse_bias[0];
    for (std::int64_t c = 0; c < hidden_size; ++c) dot += static_cast<double>(w.sparse_weight[c]) * row(token, c);
    const auto weight = static_cast<float>(std::max(dot, 0.0));
    const std::int64_t id = t.token_ids[token];
    const bool unused = id == cls_id || id == pad_id || id == eos_id || id == unk_id;
    if (!unused && weight > 0 && (!out.sparse.contains(id) || weight > out.sparse[id])) out.sparse[id] = weight;
  }
  for (std::size_t token = 1; token < t.token_ids.size(); ++token) {
    std::vector<float> vector(colbert_dims);
    for (std::int64_t d = 0; d < colbert_dims; ++d) {
      double dot = w.colbert_bias[d];
      for (std::int64_t c = 0; c < hidden_size; ++c)
        dot += static_cast<double>(w.colbert_weight[d * hidden_size + c]) * row(token, c);
      vector[d] = static_cast<float>(dot);
    }
    normalise(vector);
    out.colbert.insert(out.colbert.end(), vector.begin(), vector.end());
  }
  return out;
}

template <class T, class Space>
seqpool::buffer<T, Space> to_space(Space& space, const std::vector<T>& values) {
  seqpool::buffer<T, Space> copy(space, values.size());
  space.copy_in(std::span<const T>(values), copy.span());
  return copy;
}

template <class T, class Space>
std::vector<T> to_host(Space& space, const seqpool::buffer<T, Space>& values) {
  std::vector<T> copy(values.size());
  space.copy_out(cuda::std::span<const T>(values.data(), values.size()), std::span<T>(copy));
  return copy;
}

template <class Space>
std::map<std::string, m3_output> serve(const char* label, std::vector<text> texts, const m3_weights& w) {
  Space space;
  seqpool::state_store<Space> state(space);
  const auto sparse_weight = to_space(space, w.sparse_weight);
  const auto sparse_bias = to_space(space, w.sparse_bias);
  const auto colbert_weight = to_space(space, w.colbert_weight);
  const auto colbert_bias = to_space(space, w.colbert_bias);

  // The three parts: CLS embedded; every token weighed by relu(sparse_linear)
  // (a regression head of one output, so no epilogue) into (id, weight) lists;
  // every token through colbert_linear and normalised.
  using dense = seqpool::pooler<method::cls, head::embed, Space>;
  using lexical = seqpool::pooler<method::all, head::classify, Space, seqpool::sparse_entry>;
  using colbert = seqpool::pooler<method::all, head::embed, Space>;
  const seqpool::dense_layer sparse_linear{{sparse_weight.data(), sparse_bias.data(), 1, hidden_size},
                                           seqpool::activation_function::relu};
  const seqpool::dense_layer colbert_linear{{colbert_weight.data(), colbert_bias.data(), colbert_dims, hidden_size},
                                            seqpool::activation_function::identity};
  seqpool::multi_pooler<dense, lexical, colbert> m3(
      space, {dense(space, hidden_size)},
      {lexical(space, hidden_size, {},
               head::classify(seqpool::dense_stack{sparse_linear}, head::problem_type::regression)),
       {.drop_token_ids = {cls_id, pad_id, eos_id, unk_id}}},
      {colbert(space, hidden_size, {}, head::embed(seqpool::dense_stack{colbert_linear})), {.drop_first = true}});

  std::printf("\n== %s ==\n", label);
  std::map<std::string, m3_output> results;
  seqpool::parts_plan plan;
  for (int step = 0; results.size() < texts.size(); ++step) {
    // The scheduler: fill the token budget in arrival order, chunking what does not fit.
    seqpool::batch batch;
    std::vector<element> host_hidden;
    std::int64_t rows = 0;
    for (text& t : texts) {
      const auto length = static_cast<std::int64_t>(t.token_ids.size());
      if (t.done == length || rows == token_budget) continue;
      seqpool::request r;
      r.id = t.id;
      r.prompt_len = length;
      r.num_computed = t.done;
      r.num_scheduled = std::min(length - t.done, token_budget - rows);
      r.prompt_token_ids = t.token_ids;
      host_hidden.insert(host_hidden.end(), t.hidden.begin() + t.done * hidden_size,
                         t.hidden.begin() + (t.done + r.num_scheduled) * hidden_size);
      rows += r.num_scheduled;
      batch.requests.push_back(std::move(r));
    }
    if (batch.requests.empty()) break;  // every text read, yet not every result given: reported below
    const auto hidden = to_space(space, host_hidden);

    // Plan on the host, make room outside the step, then the step: one launch
    // sequence for the three outputs, each into its own buffer.
    m3.plan(batch, state, plan);
    m3.reserve(plan, state);
    seqpool::buffer<float, Space> dense_out(space, static_cast<std::size_t>(plan.parts[0].output_size));
    seqpool::buffer<seqpool::sparse_entry, Space> sparse_out(space,
                                                             static_cast<std::size_t>(plan.parts[1].output_size));
    seqpool::buffer<float, Space> colbert_out(space, static_cast<std::size_t>(plan.parts[2].output_size));
    const seqpool::audit_scope audit(space.audit());
    m3.forward(seqpool::make_hidden_view(hidden.data(), rows, hidden_size), plan, state, dense_out.span(),
               sparse_out.span(), colbert_out.span());
    const seqpool::audit_counts counts = audit.counts();

    const std::vector<float> dense_values = to_host(space, dense_out);
    const std::vector<seqpool::sparse_entry> sparse_values = to_host(space, sparse_out);
    const std::vector<float> colbert_values = to_host(space, colbert_out);
    int finished = 0;
    for (std::size_t i = 0; i < batch.requests.size(); ++i) {
      const seqpool::request& r = batch.requests[i];
      for (text& t : texts)
        if (t.id == r.id) t.done += r.num_scheduled;
      if (!plan.parts[0].results[i]) continue;  // the three parts finish a request in the same step
      const seqpool::result_slice& dense_slice = *plan.parts[0].results[i];
      const seqpool::result_slice& sparse_slice = *plan.parts[1].results[i];
      const seqpool::result_slice& colbert_slice = *plan.parts[2].results[i];
      m3_output& out = results[r.id.str()];
      out.dense.assign(dense_values.begin() + dense_slice.offset,
                       dense_values.begin() + dense_slice.offset + dense_slice.cols);
      // Entry 0 holds the count of pairs listed; the pairs follow, ascending by id.
      const seqpool::sparse_entry* list = sparse_values.data() + sparse_slice.offset;
      for (std::int32_t k = 1; k <= list[0].id; ++k) out.sparse[list[k].id] = list[k].weight;
      out.colbert.assign(colbert_values.begin() + colbert_slice.offset,
                         colbert_values.begin() + colbert_slice.offset + colbert_slice.rows * colbert_slice.cols);
      ++finished;
      std::printf("  %-8s dense [%lld]  sparse %3d ids  colbert [%3lld x %lld]\n", r.id.str().c_str(),
                  static_cast<long long>(dense_slice.cols), list[0].id, static_cast<long long>(colbert_slice.rows),
                  static_cast<long long>(colbert_slice.cols));
    }
    std::printf(
        "step %d: %zu requests, %lld rows, %d finished, %zu part states held | audit: uploads %lld, waits %lld, "
        "allocations %lld, launches %lld%s\n",
        step, batch.requests.size(), static_cast<long long>(rows), finished, state.size(),
        static_cast<long long>(counts.uploads), static_cast<long long>(counts.waits),
        static_cast<long long>(counts.allocations), static_cast<long long>(counts.launches),
        seqpool::keeps_sync_contract(counts) ? "  (sync contract kept)" : "  (SYNC CONTRACT BROKEN)");
    if (!seqpool::keeps_sync_contract(counts)) return {};
  }
  return results;
}

/// The largest of `differences`, or infinity where one is NaN.
double largest_of(std::initializer_list<double> differences) {
  double largest = 0;
  for (const double d : differences) largest = d <= largest ? largest : std::isnan(d) ? INFINITY : d;
  return largest;
}

/// The largest difference between two texts' outputs; an id listed on one side
/// only counts with its weight.
double difference(const m3_output& got, const m3_output& want) {
  if (got.dense.size() != want.dense.size() || got.colbert.size() != want.colbert.size()) return INFINITY;
  double largest = 0;
  for (std::size_t i = 0; i < want.dense.size(); ++i)
    largest = largest_of({largest, std::abs(got.dense[i] - want.dense[i])});
  for (std::size_t i = 0; i < want.colbert.size(); ++i)
    largest = largest_of({largest, std::abs(got.colbert[i] - want.colbert[i])});
  std::map<std::int64_t, float> ids = got.sparse;
  ids.insert(want.sparse.begin(), want.sparse.end());
  for (const auto& [id, weight] : ids) {
    const auto weight_in = [&](const m3_output& out) { return out.sparse.contains(id) ? out.sparse.at(id) : 0.0f; };
    largest = largest_of({largest, std::abs(weight_in(got) - weight_in(want))});
  }
  return largest;
}

}  // namespace

int main() {
  const std::vector<text> texts = make_texts();
  const m3_weights weights = make_weights();
  const auto on_host = serve<seqpool::host_space>("host_space", texts, weights);
#if defined(__CUDACC__)
  const auto on_device =
      serve<seqpool::device_space<seqpool::cuda_backend>>("device_space<cuda_backend>", texts, weights);
#else
  const auto on_device =
      serve<seqpool::device_space<seqpool::omp_backend>>("device_space<omp_backend>", texts, weights);
#endif
  if (on_host.size() != texts.size() || on_device.size() != texts.size()) {
    std::printf("a space did not finish every text\n");
    return 1;
  }
  double largest = 0;
  for (const text& t : texts) {
    const m3_output want = flag_embedding(t, weights);
    largest = largest_of({largest, difference(on_host.at(t.id), want), difference(on_device.at(t.id), want)});
  }
  const m3_output& first = on_host.at(texts[0].id);
  std::printf("\n%s: %zu sparse ids, the heaviest", texts[0].id.c_str(), first.sparse.size());
  std::vector<std::pair<std::int64_t, float>> heaviest(first.sparse.begin(), first.sparse.end());
  std::ranges::sort(heaviest, [](const auto& a, const auto& b) { return a.second > b.second; });
  for (std::size_t k = 0; k < std::min<std::size_t>(3, heaviest.size()); ++k)
    std::printf(" %lld:%.4f", static_cast<long long>(heaviest[k].first), heaviest[k].second);
  std::printf("\n%zu texts on both spaces; largest difference from FlagEmbedding's maths: %.2g\n", texts.size(),
              largest);
  return largest < 1e-4 ? 0 : 1;
}
