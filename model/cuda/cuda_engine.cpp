#include "model/cuda/cuda_engine.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <deque>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "cache/page_pool.hpp"
#include "common/log.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/draw.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/cuda/shared_prefix.hpp"
#include "model/cuda/cuda_page_allocator.hpp"
#include "model/cuda/cuda_weights.hpp"
#include "model/token_mask.hpp"

namespace arbor::model {
namespace {

namespace cu = kernels::cuda;

// Measurement switches: `name`=0 in the environment turns a default-on path off.
bool switched_off(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "0";
}


Result<void> cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  cudaGetLastError();
  return fail(ErrorCode::internal, "CUDA engine: " + cu::error_text(what, e));
}

// A step's row metadata, built on the host and uploaded as one int32 array:
// [tokens | positions | row_page | row_slot | row_table | logit_rows | draws |
//  masked_rows | masks | tile_rows | tile_length | row_start | page_table] (tokens:
// future ones negative; draws: a cu::RowDraw per token row; masked_rows: the token rows
// with a token mask, their masks' words after; tile_*, row_start: shared-prefix tiles of the
// decode rows and of each prefill run, kernels/cuda/shared_prefix.hpp). logit_rows lists
// the rows whose logits go back to the host first, then the rows that only send back
// the token drawn from them.
// Steady decode steps (the same rows, sharing as before) get the same offsets and bounds,
// so that their kernels' arguments repeat and a graph replays (GraphKey): the page table,
// the one section that grows as sequences do, comes last, and the attention bounds are
// rounded up to kPositionBucket (the kernels stop at each row's own length).
constexpr int kPositionBucket = 256;

// Each slot's drawn-token buffer holds this many rows from the start (allocated in init),
// so that its address, the next step's future-token argument, stays put: a graph
// captured before a slot's first token step replays after it.
constexpr std::size_t kTokenRowsReserved = 256;

struct StepPlan {
  std::vector<std::int32_t> ints;
  std::vector<std::int32_t> late_rows;  // the token rows with mask_later (kept on the host)
  int rows = 0, logit_rows = 0, token_rows = 0, max_positions = 0, num_masked = 0;
  // The last rows, padding: of logit_rows, and of token_rows too when the batch draws
  // tokens. Nothing of theirs leaves the device.
  int padding_rows = 0, padding_token_rows = 0;
  std::size_t positions = 0, row_page = 0, row_slot = 0, row_table = 0, logit_row_ids = 0, page_table = 0;
  std::size_t tile_rows = 0, tile_length = 0, row_start = 0, draws = 0, masked_rows = 0, masks = 0;
  int num_tiles = 0, max_tile_length = 0, max_own_positions = 0;

  // `padded_rows` (at least the batch's rows) rounds a decode step's rows up to a bucket.
  void build(std::span<const SequenceStep> batch, int page_size, int padded_rows) {
    ints.clear();
    late_rows.clear();
    rows = logit_rows = token_rows = max_positions = 0;
    std::vector<std::int32_t> pos, page, slot, table, want, want_token, flat_pages, draw_words, masked, mask_words;
    std::vector<cu::DecodeRowPages> decode_rows;
    struct PrefillRun {
      int first_row, first_pos, count;
    };
    std::vector<PrefillRun> prefill_runs;
    for (const SequenceStep& s : batch) {
      const int n = int(s.tokens.size());
      const int end = s.start_pos + n;
      const auto first_page = std::int32_t(flat_pages.size());
      const int num_pages = (end + page_size - 1) / page_size;
      flat_pages.insert(flat_pages.end(), s.pages.begin(), s.pages.begin() + num_pages);
      if (n == 1) decode_rows.push_back({rows, s.start_pos, std::span(s.pages.data(), std::size_t(num_pages))});
      if (n > 1) prefill_runs.push_back({rows, s.start_pos, n});
      for (int j = 0; j < n; ++j) {
        const int p = s.start_pos + j;
        ints.push_back(s.tokens[std::size_t(j)]);
        pos.push_back(p);
        page.push_back(s.pages[std::size_t(p / page_size)]);
        slot.push_back(p % page_size);
        table.push_back(first_page);
        if (s.logits == LogitsMode::all || (s.logits == LogitsMode::last && j == n - 1)) want.push_back(rows + j);
        if (s.logits == LogitsMode::last_token && j == n - 1) {
          if (!s.allowed.empty()) {
            masked.push_back(std::int32_t(want_token.size()));
            append_mask(mask_words, s.allowed);
          }
          if (s.mask_later) late_rows.push_back(std::int32_t(want_token.size()));
          want_token.push_back(rows + j);
          append_draw(draw_words, s.draw);
        }
      }
      rows += n;
      max_positions = std::max(max_positions, end);
    }
    // Padding rows: token 0 at no position (nothing stored, nothing attended: their
    // attention output is 0/0, and stays in their own rows), with an output like the
    // batch's rows (a greedy draw, or logits) so that the output counts stay put too.
    padding_rows = std::max(0, padded_rows - rows);
    const bool draws_tokens = !want_token.empty();
    padding_token_rows = draws_tokens ? padding_rows : 0;
    for (; rows < padded_rows; ++rows) {
      ints.push_back(0);
      pos.push_back(-1);
      page.push_back(-1);
      slot.push_back(0);
      table.push_back(0);
      if (!draws_tokens) {
        want.push_back(rows);
        continue;
      }
      want_token.push_back(rows);
      append_draw(draw_words, TokenDraw{});
    }
    token_rows = int(want_token.size());
    num_masked = int(masked.size());
    logit_rows = int(want.size()) + token_rows;
    want.insert(want.end(), want_token.begin(), want_token.end());
    cu::SharedPrefixPlan tiles = cu::plan_shared_prefixes(decode_rows, rows, page_size);
    for (const PrefillRun& run : prefill_runs) cu::add_prefill_tiles(tiles, run.first_row, run.first_pos, run.count);
    num_tiles = tiles.num_tiles();
    max_tile_length = bucket(tiles.max_tile_length);
    max_own_positions = bucket(cu::max_own_positions(tiles, pos));
    max_positions = bucket(max_positions);
    auto append = [&](std::size_t& at, const std::vector<std::int32_t>& v) {
      at = ints.size();
      ints.insert(ints.end(), v.begin(), v.end());
    };
    append(positions, pos);
    append(row_page, page);
    append(row_slot, slot);
    append(row_table, table);
    append(logit_row_ids, want);
    append(draws, draw_words);
    append(masked_rows, masked);
    append(masks, mask_words);
    append(tile_rows, tiles.tile_rows);
    append(tile_length, tiles.tile_length);
    append(row_start, tiles.row_start);
    append(page_table, flat_pages);
  }

  // A bound on positions rounded up to a whole kPositionBucket (0 stays 0: no bound).
  static int bucket(int positions) { return (positions + kPositionBucket - 1) / kPositionBucket * kPositionBucket; }

  static void append_draw(std::vector<std::int32_t>& words, const TokenDraw& d) {
    const cu::RowDraw row{d.temperature, d.top_k, d.top_p, float(d.uniform)};
    const auto* w = reinterpret_cast<const std::int32_t*>(&row);
    words.insert(words.end(), w, w + 4);
  }

  // A token mask's 64-bit words as 32-bit ones (little-endian: the low half first),
  // which is how the device reads them.
  static void append_mask(std::vector<std::int32_t>& words, std::span<const std::uint64_t> mask) {
    const std::size_t at = words.size();
    words.resize(at + 2 * mask.size());
    std::memcpy(words.data() + at, mask.data(), mask.size_bytes());
  }
};

// What a step's kernels take as arguments besides the contents of device memory: two
// steps with equal keys launch the same kernels with the same arguments, so the graph
// captured for one replays for the other as it is (the weights, the config and the
// engine's switches never change). Invariant: an argument a step's kernels take that is
// not in the key replays stale; whatever a new kernel argument depends on goes here.
struct GraphKey {
  int rows = 0, logit_rows = 0, token_rows = 0, num_masked = 0, max_positions = 0, max_own_positions = 0;
  int num_tiles = 0, max_tile_length = 0;
  bool draws_later = false;  // the draws wait for supply_masks(): not in the graph
  std::array<std::size_t, 12> offsets{};  // of the metadata sections
  std::array<int, 4> geometry{};          // the KV pool's layers, KV heads, head_dim, page size
  std::array<const void*, 16> memory{};   // every device address the kernels are given
  bool operator==(const GraphKey&) const = default;
};

// What a submitted step keeps until collected: its metadata on the host (the upload
// reads it when the device gets there), its outputs' pinned destinations and sizes, its
// token rows' ids on the device (the next step's future tokens), its end event. And
// the graph of the last decode step queued from this slot, with its key: that step was
// collected before this slot is used again, so the graph is never updated while a
// launch of it may still run. A step with late masks also keeps their rows and, once
// supplied, their upload's source.
struct StepSlot {
  cu::PinnedBuffer ints, logits, tokens_host, late_masks;
  cu::DeviceBuffer tokens;
  int logit_rows = 0, token_rows = 0;
  std::vector<std::int32_t> late_rows;
  bool awaiting_masks = false;  // submitted with late masks, not yet supplied
  cudaEvent_t done = nullptr;
  cudaGraphExec_t graph = nullptr;
  GraphKey graph_key;
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(const LlamaConfig& config, int device, cu::DeviceInfo info)
      : config_(config), device_(device), info_(std::move(info)),
        allocator_(std::make_shared<CudaPageAllocator>(device)) {}
  ~CudaEngine() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);  // steps not collected end first
    for (StepSlot& slot : slots_) {
      if (slot.done != nullptr) cudaEventDestroy(slot.done);
      if (slot.graph != nullptr) cudaGraphExecDestroy(slot.graph);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Result<void> init(const LlamaWeights& weights, kernels::MatmulPrecision precision) {
    if (auto ok = cuda_ok(cudaSetDevice(device_), "cudaSetDevice"); !ok) return ok;
    if (auto ok = cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); !ok)
      return ok;
    std::string error;
    if (!matmul_.init(stream_, &error)) return fail(ErrorCode::internal, "CUDA engine: " + error);
    for (StepSlot& slot : slots_) {
      if (auto ok = cuda_ok(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming), "cudaEventCreate"); !ok)
        return ok;
      if (auto ok = grow(slot.tokens, kTokenRowsReserved * sizeof(std::int32_t)); !ok) return ok;
    }
    auto uploaded = CudaWeights::upload(config_, weights);
    if (!uploaded) return std::unexpected(uploaded.error());
    weights_ = std::move(*uploaded);
    graphs_ = !switched_off("ARBOR_CUDA_GRAPHS");
    replay_graphs_ = !switched_off("ARBOR_CUDA_GRAPH_REPLAY");
    tensor_core_attention_ = !switched_off("ARBOR_CUDA_TENSOR_CORE_ATTENTION");
    if (const char* rows = std::getenv("ARBOR_CUDA_GEMV_MAX_ROWS"); rows != nullptr && *rows != '\0')
      matmul_.set_gemv_max_rows(std::atoi(rows));
    matmul_.set_gemv_int8(precision == kernels::MatmulPrecision::fast);
    return {};
  }

  const LlamaConfig& config() const override { return config_; }
  Device device() const override { return Device::cuda; }
  std::string describe() const override {
    return "cuda (" + info_.name + ", device " + std::to_string(device_) + ", sm_" + std::to_string(info_.major) +
           std::to_string(info_.minor) + ", " + std::to_string(info_.total_bytes >> 30) + " GiB; weights " +
           std::to_string(weights_ ? weights_->device_bytes >> 20 : 0) + " MiB; decode steps as CUDA graphs: " +
           (graphs_ ? (replay_graphs_ ? "on" : "on, captured every step") : "off") +
           "; tensor-core attention: " + (tensor_core_attention_ ? "on" : "off") + "; GEMV up to " +
           std::to_string(matmul_.gemv_max_rows()) + " rows, " +
           (matmul_.gemv_int8() ? "int8 activations: precision fast" : "f32 activations") + ")";
  }
  std::shared_ptr<cache::PageAllocator> page_allocator() override { return allocator_; }

  std::optional<std::size_t> kv_budget_bytes(int max_step_tokens) const override {
    std::size_t free = 0, total = 0;
    if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    // The buffers reserve() grows to for the largest step (every row with logits, the
    // whole context in attention), plus the matmul's scratch (weight tile, f16
    // activations), cuBLAS's workspace and the step metadata.
    const StepSizes s = step_sizes(max_step_tokens, max_step_tokens, config_.context_length);
    const std::size_t matmul_scratch =
        cu::Matmul::scratch_bytes(max_step_tokens, std::max(config_.hidden, config_.ffn_dim));
    const std::size_t workspace =
        5 * s.hidden + 2 * s.kv + 2 * s.ffn + s.logits + s.attention + matmul_scratch + (64u << 20);
    if (free <= workspace) return 0;
    return std::size_t(double(free - workspace) * kDeviceKvFraction);
  }

  Result<void> forward(std::span<const SequenceStep> batch, cache::PagePool& kv, StepOutput& out) override {
    if (!in_flight_.empty())
      return fail(ErrorCode::internal, "CUDA engine: forward() with submitted steps not collected; collect them first");
    if (auto ok = submit(batch, kv); !ok) return ok;
    return collect(out);
  }

  bool asynchronous() const override { return true; }
  GraphCounts graph_counts() const override { return graph_counts_; }

  // Queues the step: metadata up through a pinned buffer, the kernels (a graph for a
  // decode step), its outputs down into pinned buffers, then an event. Returns without
  // waiting. The two slots alternate, so the step queued before keeps its buffers (its
  // drawn tokens are this step's future tokens) until it is collected.
  Result<void> submit(std::span<const SequenceStep> batch, cache::PagePool& kv) override {
    if (in_flight_.size() >= kMaxStepsInFlight)
      return fail(ErrorCode::internal, "CUDA engine: " + std::to_string(kMaxStepsInFlight) +
                                           " steps are submitted and not collected; collect one first");
    if (previous_ != nullptr && previous_->awaiting_masks)
      return fail(ErrorCode::internal, "CUDA engine: the step submitted last waits for its masks; supply_masks() first");
    const std::size_t futures = previous_ == nullptr ? 0 : std::size_t(previous_->token_rows);
    if (auto ok = check_batch(batch, kv, futures); !ok) return ok;
    const cache::KvGeometry& g = kv.geometry();
    if (allocator_->region() == nullptr ||
        std::size_t(kv.num_pages()) * g.bytes_per_page() > allocator_->region_bytes())
      return fail(ErrorCode::invalid_argument,
                  "CUDA engine: the KV pool does not live in this engine's device memory; build it on the "
                  "engine's page_allocator()");
    if (auto ok = cuda_ok(cudaSetDevice(device_), "cudaSetDevice"); !ok) return ok;
    plan_.build(batch, g.page_size, padded_rows(batch));
    StepSlot& slot = slots_[next_slot_];
    if (auto ok = reserve(slot); !ok) return ok;
    std::copy(plan_.ints.begin(), plan_.ints.end(), slot.ints.as<std::int32_t>());
    if (auto ok = cuda_ok(cudaMemcpyAsync(ints_.data(), slot.ints.data(), plan_.ints.size() * sizeof(std::int32_t),
                                          cudaMemcpyHostToDevice, stream_),
                          "cudaMemcpyAsync (step metadata)");
        !ok)
      return ok;
    futures_ = previous_ == nullptr ? nullptr : previous_->tokens.as<const std::int32_t>();
    tokens_out_ = slot.tokens.as<std::int32_t>();
    slot.logit_rows = plan_.logit_rows - plan_.padding_rows;
    slot.token_rows = plan_.token_rows - plan_.padding_token_rows;
    slot.late_rows = plan_.late_rows;
    if (auto ok = run_step_kernels(g, slot); !ok) return ok;
    slot.awaiting_masks = !slot.late_rows.empty();
    if (!slot.awaiting_masks)
      if (auto ok = enqueue_outputs(slot); !ok) return ok;
    previous_ = &slot;
    next_slot_ = (next_slot_ + 1) % slots_.size();
    in_flight_.push_back(&slot);
    return {};
  }

  // The late masks go up through the slot's pinned buffer ([their token rows | their
  // words]), then the step's masks and draws run, its outputs are copied and its event
  // recorded, as submit() does for a step without late masks. The step's metadata,
  // logits and plan are still the device's and plan_'s: nothing was queued since.
  Result<void> supply_masks(std::span<const std::span<const std::uint64_t>> masks) override {
    StepSlot* slot = previous_;
    if (slot == nullptr || !slot->awaiting_masks)
      return fail(ErrorCode::internal, "CUDA engine: supply_masks() without a submitted step waiting for masks");
    const std::size_t words = token_mask_words(config_.vocab_size);
    if (auto ok = check_late_masks(masks, slot->late_rows.size(), words); !ok) return ok;
    std::vector<std::int32_t> late;
    std::vector<std::int32_t> late_words;
    for (std::size_t i = 0; i < masks.size(); ++i) {
      if (masks[i].empty()) continue;
      late.push_back(slot->late_rows[i]);
      StepPlan::append_mask(late_words, masks[i]);
    }
    const int num_masked = int(late.size());
    late.insert(late.end(), late_words.begin(), late_words.end());
    const std::size_t bytes = late.size() * sizeof(std::int32_t);
    std::string error;
    if (!slot->late_masks.reserve(bytes, &error))
      return fail(ErrorCode::out_of_memory, "CUDA engine: no pinned host memory for a step's masks (" + error + ")");
    if (auto ok = grow(late_masks_, bytes); !ok) return ok;
    if (auto ok = cuda_ok(cudaSetDevice(device_), "cudaSetDevice"); !ok) return ok;
    if (num_masked > 0) {
      std::copy(late.begin(), late.end(), slot->late_masks.as<std::int32_t>());
      if (auto ok = cuda_ok(cudaMemcpyAsync(late_masks_.data(), slot->late_masks.data(), bytes,
                                            cudaMemcpyHostToDevice, stream_),
                            "cudaMemcpyAsync (late masks)");
          !ok)
        return ok;
      const auto* rows = late_masks_.as<const std::int32_t>();
      cu::mask_rows(token_logits(), rows, reinterpret_cast<const std::uint32_t*>(rows + num_masked), num_masked,
                    2 * int(words), config_.vocab_size, stream_);
    }
    enqueue_draws();
    slot->awaiting_masks = false;
    return enqueue_outputs(*slot);
  }

  // Waits for the oldest step's event and hands out its outputs.
  Result<void> collect(StepOutput& out) override {
    if (in_flight_.empty()) return fail(ErrorCode::internal, "CUDA engine: no step was submitted to collect");
    StepSlot& slot = *in_flight_.front();
    in_flight_.pop_front();
    if (slot.awaiting_masks) {  // its draws never ran: dropped, and nothing may take its tokens
      slot.awaiting_masks = false;
      if (previous_ == &slot) previous_ = nullptr;
      return fail(ErrorCode::internal, "CUDA engine: the step's masks were never supplied (supply_masks()); it is dropped");
    }
    if (auto ok = cuda_ok(cudaEventSynchronize(slot.done), "the step's kernels"); !ok) return ok;
    if (auto ok = cuda_ok(cudaGetLastError(), "the step's kernels"); !ok) return ok;
    const std::size_t kept = std::size_t(slot.logit_rows - slot.token_rows) * std::size_t(config_.vocab_size);
    out.logits.assign(slot.logits.as<const float>(), slot.logits.as<const float>() + kept);
    out.tokens.assign(slot.tokens_host.as<const std::int32_t>(),
                      slot.tokens_host.as<const std::int32_t>() + slot.token_rows);
    return {};
  }

 private:
  // Every kernel of the step, in order: embedding, layers, the logit rows' norm and
  // vocabulary matmul, their drawn tokens.
  Result<void> enqueue_step_kernels(const cache::KvGeometry& g) {
    cu::embed(weights_->token_embd, ints(0), futures_, plan_.rows, x_.as<float>(), stream_);
    // Each sub-layer finds its input normed in xn_: the first here, the others from the
    // fused residual add that ends the sub-layer before.
    cu::rmsnorm(x_.as<float>(), weights_->layers[0].attn_norm, plan_.rows, config_.hidden, config_.rms_eps,
                xn_.as<float>(), stream_);
    for (int l = 0; l < config_.num_layers; ++l) {
      if (auto ok = attention_block(l, g); !ok) return ok;
      if (auto ok = ffn_block(l); !ok) return ok;
    }
    return logit_kernels();
  }

  // A decode step's rows rounded up to a bucket (1, 2, 4, 8, then multiples of 16) when
  // its graph may replay: agents that finish or join within a bucket leave its kernels'
  // arguments as they were. The extra rows cost little where decode reads the weights
  // once for every row (the GEMV and the 16-row GEMM tiles). Other steps: their rows.
  int padded_rows(std::span<const SequenceStep> batch) const {
    const bool decode = std::all_of(batch.begin(), batch.end(), [](const SequenceStep& s) {
      return s.tokens.size() == 1 && (s.logits == LogitsMode::last_token || s.logits == LogitsMode::last);
    });
    const int rows = int(batch.size());
    if (rows == 0 || !decode || !graphs_ || !replay_graphs_) return rows;
    const int bucket = rows <= 8 ? int(std::bit_ceil(unsigned(rows))) : (rows + 15) / 16 * 16;
    return weights_->kernels_only(bucket) ? bucket : rows;
  }

  // Whether this step's kernels may go through a graph: no cuBLAS call among them (every
  // matrix quantized, at most kQuantizedGemmMaxRows rows: decode steps).
  bool step_fits_a_graph() const { return graphs_ && weights_->kernels_only(plan_.rows); }

  // A decode step is hundreds of small kernels (8-10 a layer): launched one by one, a small
  // model's step is bound by the host's launch cost. Run as a graph instead, launched
  // once. A steady decode step (the same key as the slot's last graph) replays that graph
  // as it is: no capture, no update, a single launch call. Another step is captured, and
  // the slot's graph updated in place when the kernels are the same (cheaper than
  // instantiating), else instantiated anew. A capture or launch the device refuses turns
  // graphs off for this engine (logged) and the step runs launch by launch.
  Result<void> run_step_kernels(const cache::KvGeometry& g, StepSlot& slot) {
    if (!step_fits_a_graph()) return enqueue_step_kernels(g);
    // A capture may not allocate: the matmuls' f16 activation scratch is grown first (a
    // failure here shows again, with its message, when the step runs without a graph).
    std::string error;
    if (!matmul_.reserve_activations(plan_.rows, std::max(config_.hidden, config_.ffn_dim), &error))
      return enqueue_step_kernels(g);
    const GraphKey key = graph_key(g);
    if (replay_graphs_ && slot.graph != nullptr && key == slot.graph_key) {
      ++graph_counts_.replayed;
    } else {
      if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed) != cudaSuccess)
        return graphs_failed("cudaStreamBeginCapture", g);
      Result<void> enqueued = enqueue_step_kernels(g);
      cudaGraph_t graph = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
      if (!enqueued) {  // nothing ran: the captured work is dropped
        if (graph != nullptr) cudaGraphDestroy(graph);
        cudaGetLastError();
        return enqueued;
      }
      if (ended != cudaSuccess) return graphs_failed("cudaStreamEndCapture", g);
      ++graph_counts_.captured;
      const char* failed = adopt_graph(slot, graph);
      cudaGraphDestroy(graph);
      if (failed != nullptr) return graphs_failed(failed, g);
      slot.graph_key = key;
    }
    return cudaGraphLaunch(slot.graph, stream_) == cudaSuccess ? Result<void>{} : graphs_failed("cudaGraphLaunch", g);
  }

  // Makes the slot's graph `graph`: updated in place, or instantiated when it has other
  // kernels. The failing call's name, or null.
  static const char* adopt_graph(StepSlot& slot, cudaGraph_t graph) {
    if (slot.graph != nullptr) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(slot.graph, graph, &info) == cudaSuccess) return nullptr;
      cudaGetLastError();
      cudaGraphExecDestroy(slot.graph);
      slot.graph = nullptr;
    }
    if (cudaGraphInstantiate(&slot.graph, graph, 0) == cudaSuccess) return nullptr;
    slot.graph = nullptr;
    return "cudaGraphInstantiate";
  }

  // The arguments this step's kernels are launched with, beyond the fixed ones.
  GraphKey graph_key(const cache::KvGeometry& g) const {
    GraphKey k;
    k.rows = plan_.rows;
    k.logit_rows = plan_.logit_rows;
    k.token_rows = plan_.token_rows;
    k.num_masked = plan_.num_masked;
    k.draws_later = !plan_.late_rows.empty();
    k.max_positions = plan_.max_positions;
    k.max_own_positions = plan_.max_own_positions;
    k.num_tiles = plan_.num_tiles;
    k.max_tile_length = plan_.max_tile_length;
    k.offsets = {plan_.positions, plan_.row_page,  plan_.row_slot,   plan_.row_table,   plan_.logit_row_ids,
                 plan_.draws,     plan_.masked_rows, plan_.masks,   plan_.tile_rows,   plan_.tile_length,
                 plan_.row_start, plan_.page_table};
    k.geometry = {g.num_layers, g.num_kv_heads, g.head_dim, g.page_size};
    k.memory = {x_.data(),   xn_.data(),  q_.data(),     k_.data(),         v_.data(),  attn_.data(),
                gate_.data(), up_.data(), tmp_.data(),   logits_.data(),    ints_.data(),
                attention_scratch_.data(), matmul_.activation_scratch(), futures_, tokens_out_,
                allocator_->region()};
    return k;
  }

  Result<void> graphs_failed(const char* call, const cache::KvGeometry& g) {
    const cudaError_t e = cudaGetLastError();
    log::logger().warn("CUDA engine: {} failed ({}); decode steps run without CUDA graphs from now on", call,
                       cudaGetErrorString(e));
    graphs_ = false;
    return enqueue_step_kernels(g);
  }

  const std::int32_t* ints(std::size_t at) const { return ints_.as<const std::int32_t>() + at; }

  Result<void> grow(cu::DeviceBuffer& buffer, std::size_t bytes) {
    std::string error;
    if (!buffer.reserve(bytes, &error))
      return fail(ErrorCode::out_of_memory, "CUDA engine: no device memory for this step's activations (" + error +
                                                "); lower max_step_tokens or prefill_chunk");
    return {};
  }

  cu::PagedAttentionBatch attention_batch(int layer, const cache::KvGeometry& g) const {
    cu::PagedAttentionBatch a;
    a.q = q_.as<const float>();
    a.out = attn_.as<float>();
    a.num_rows = plan_.rows;
    a.row_pos = ints(plan_.positions);
    a.row_table = ints(plan_.row_table);
    a.page_table = ints(plan_.page_table);
    a.kv_base = static_cast<const std::uint16_t*>(allocator_->region());
    a.elements_per_page = std::int64_t(g.elements_per_page());
    a.k_offset = std::int64_t(g.offset(layer, cache::KvKind::key, 0, 0));
    a.v_offset = std::int64_t(g.offset(layer, cache::KvKind::value, 0, 0));
    a.num_q_heads = config_.num_heads;
    a.num_kv_heads = config_.num_kv_heads;
    a.head_dim = config_.head_dim;
    a.page_size = g.page_size;
    a.max_positions = plan_.max_positions;
    a.max_own_positions = plan_.max_own_positions;
    a.scale = 1.f / std::sqrt(float(config_.head_dim));
    a.tensor_cores = tensor_core_attention_;
    if (plan_.num_tiles > 0) {
      a.num_tiles = plan_.num_tiles;
      a.max_tile_length = plan_.max_tile_length;
      a.tile_rows = ints(plan_.tile_rows);
      a.tile_length = ints(plan_.tile_length);
      a.row_start = ints(plan_.row_start);
    }
    return a;
  }

  // Bytes of each kind of step buffer for `rows` rows, `logit_rows` of them with logits,
  // attending to at most `max_positions` positions.
  struct StepSizes {
    std::size_t hidden = 0, kv = 0, ffn = 0, logits = 0, attention = 0;
  };
  StepSizes step_sizes(int rows, int logit_rows, int max_positions) const {
    const std::size_t r = std::size_t(rows), f = sizeof(float);
    cu::PagedAttentionBatch a;  // only the sizes matter for the scratch: a bound for any tiles
    a.num_rows = rows;
    a.num_q_heads = config_.num_heads;
    a.head_dim = config_.head_dim;
    a.max_positions = max_positions;
    a.num_tiles = 1;
    a.max_tile_length = max_positions;
    return {r * std::size_t(config_.hidden) * f, r * std::size_t(config_.num_kv_heads) * config_.head_dim * f,
            r * std::size_t(config_.ffn_dim) * f,
            std::size_t(std::max(logit_rows, 1)) * std::size_t(config_.vocab_size) * f,
            cu::attention_scratch_bytes(a)};
  }

  Result<void> reserve(StepSlot& slot) {
    const StepSizes s = step_sizes(plan_.rows, plan_.logit_rows, plan_.max_positions);
    // The metadata grows with the page table, step by step: a power of two, so that it is
    // seldom reallocated (a free waits for the device, and moves the graphs' argument).
    const std::size_t ints_bytes = std::bit_ceil(plan_.ints.size() * sizeof(std::int32_t));
    const std::size_t token_bytes = std::size_t(plan_.token_rows) * sizeof(std::int32_t);
    const std::size_t kept_bytes =
        std::size_t(plan_.logit_rows - plan_.token_rows) * std::size_t(config_.vocab_size) * sizeof(float);
    std::string error;
    for (auto [buffer, bytes] : {std::pair{&slot.ints, ints_bytes}, std::pair{&slot.logits, kept_bytes},
                                 std::pair{&slot.tokens_host, token_bytes}})
      if (!buffer->reserve(bytes, &error))
        return fail(ErrorCode::out_of_memory, "CUDA engine: no pinned host memory for a step (" + error + ")");
    if (auto ok = grow(slot.tokens, token_bytes); !ok) return ok;
    for (auto [buffer, bytes] : {std::pair{&x_, s.hidden}, std::pair{&xn_, s.hidden}, std::pair{&q_, s.hidden},
                                 std::pair{&attn_, s.hidden}, std::pair{&tmp_, s.hidden}, std::pair{&k_, s.kv},
                                 std::pair{&v_, s.kv}, std::pair{&gate_, s.ffn}, std::pair{&up_, s.ffn},
                                 std::pair{&logits_, s.logits},
                                 std::pair{&ints_, ints_bytes},
                                 std::pair{&attention_scratch_, s.attention}})
      if (auto ok = grow(*buffer, bytes); !ok) return ok;
    return {};
  }

  Result<void> matmul(const cu::DeviceMatrix& w, const float* x, std::int64_t m, float* y) {
    std::string error;
    if (!matmul_.run(w, x, m, y, &error)) return fail(ErrorCode::internal, "CUDA engine: " + error);
    return {};
  }

  // out = silu(x gate^T) * (x up^T); `up_scratch` takes up's product where the gating is not fused.
  Result<void> swiglu(const cu::DeviceMatrix& gate, const cu::DeviceMatrix& up, const float* x, std::int64_t m,
                      float* out, float* up_scratch) {
    std::string error;
    if (!matmul_.run_swiglu(gate, up, x, m, out, up_scratch, &error))
      return fail(ErrorCode::internal, "CUDA engine: " + error);
    return {};
  }

  // Matrices applied to the same activations: one launch for all when the GEMV applies.
  Result<void> matmul_group(std::span<const cu::MatmulTarget> targets, const float* x, std::int64_t m) {
    std::string error;
    if (!matmul_.run_group(targets.data(), int(targets.size()), x, m, &error))
      return fail(ErrorCode::internal, "CUDA engine: " + error);
    return {};
  }

  Result<void> attention_block(int layer, const cache::KvGeometry& g) {
    const CudaLayerWeights& w = weights_->layers[std::size_t(layer)];
    const int rows = plan_.rows, hidden = config_.hidden;
    const cu::MatmulTarget qkv[] = {{w.wq, q_.as<float>()}, {w.wk, k_.as<float>()}, {w.wv, v_.as<float>()}};
    if (auto ok = matmul_group(qkv, xn_.as<float>(), rows); !ok) return ok;
    cu::KvLayerView view;
    view.kv_base = static_cast<std::uint16_t*>(allocator_->region());
    view.elements_per_page = std::int64_t(g.elements_per_page());
    view.k_offset = std::int64_t(g.offset(layer, cache::KvKind::key, 0, 0));
    view.v_offset = std::int64_t(g.offset(layer, cache::KvKind::value, 0, 0));
    view.num_kv_heads = config_.num_kv_heads;
    view.head_dim = config_.head_dim;
    view.page_size = g.page_size;
    cu::rope_store_kv(q_.as<float>(), k_.as<float>(), v_.as<float>(), ints(plan_.positions), rows, config_.num_heads,
                      config_.rope_dim, config_.rope_theta, ints(plan_.row_page), ints(plan_.row_slot), view, stream_);
    cu::paged_attention(attention_batch(layer, g), attention_scratch_.as<float>(), stream_);
    if (auto ok = matmul(w.wo, attn_.as<float>(), rows, tmp_.as<float>()); !ok) return ok;
    // The residual, and the FFN's norm of it.
    cu::add_rmsnorm(x_.as<float>(), tmp_.as<float>(), w.ffn_norm, rows, hidden, config_.rms_eps, xn_.as<float>(),
                    stream_);
    return {};
  }

  Result<void> ffn_block(int layer) {
    const CudaLayerWeights& w = weights_->layers[std::size_t(layer)];
    const int rows = plan_.rows, hidden = config_.hidden;
    // Gate, up and their SwiGLU in one GEMV launch where it applies.
    if (auto ok = swiglu(w.gate, w.up, xn_.as<float>(), rows, gate_.as<float>(), up_.as<float>()); !ok) return ok;
    if (auto ok = matmul(w.down, gate_.as<float>(), rows, tmp_.as<float>()); !ok) return ok;
    // The residual, and the next layer's attention norm of it (the last layer's rows
    // are normed by compute_logits, for the rows that want logits only).
    if (layer + 1 < config_.num_layers) {
      cu::add_rmsnorm(x_.as<float>(), tmp_.as<float>(), weights_->layers[std::size_t(layer) + 1].attn_norm, rows,
                      hidden, config_.rms_eps, xn_.as<float>(), stream_);
    } else {
      cu::add_inplace(x_.as<float>(), tmp_.as<float>(), std::int64_t(rows) * hidden, stream_);
    }
    return {};
  }

  // Norm and vocabulary matmul for the rows with an output only; the token rows draw
  // their token on the device (greedy or sampled), masked first where they have a mask.
  Result<void> logit_kernels() {
    const int n = plan_.logit_rows, drawn = plan_.token_rows, hidden = config_.hidden;
    const int vocab = config_.vocab_size;
    if (n == 0) return {};
    cu::gather_rows(x_.as<float>(), ints(plan_.logit_row_ids), n, hidden, tmp_.as<float>(), stream_);
    cu::rmsnorm(tmp_.as<float>(), weights_->output_norm, n, hidden, config_.rms_eps, xn_.as<float>(), stream_);
    if (auto ok = matmul(weights_->output, xn_.as<float>(), n, logits_.as<float>()); !ok) return ok;
    if (drawn == 0) return {};
    cu::mask_rows(token_logits(), ints(plan_.masked_rows), reinterpret_cast<const std::uint32_t*>(ints(plan_.masks)),
                  plan_.num_masked, 2 * int(token_mask_words(vocab)), vocab, stream_);
    if (plan_.late_rows.empty()) enqueue_draws();  // else supply_masks() masks the late rows, then draws
    return {};
  }

  // The token rows' logits: after the rows whose logits go back.
  float* token_logits() const {
    const int kept = plan_.logit_rows - plan_.token_rows;
    return logits_.as<float>() + std::size_t(kept) * std::size_t(config_.vocab_size);
  }

  void enqueue_draws() {
    cu::draw_rows(token_logits(), reinterpret_cast<const cu::RowDraw*>(ints(plan_.draws)), plan_.token_rows,
                  config_.vocab_size, tokens_out_, stream_);
  }

  // The returned rows' logits in one copy, the drawn tokens in another, both into the
  // slot's pinned buffers; then the event collect() waits for.
  Result<void> enqueue_outputs(StepSlot& slot) {
    const std::size_t kept = std::size_t(slot.logit_rows - slot.token_rows) * std::size_t(config_.vocab_size);
    if (kept > 0)
      if (auto ok = cuda_ok(cudaMemcpyAsync(slot.logits.data(), logits_.data(), kept * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream_),
                            "cudaMemcpyAsync (logits)");
          !ok)
        return ok;
    if (slot.token_rows > 0)
      if (auto ok = cuda_ok(cudaMemcpyAsync(slot.tokens_host.data(), slot.tokens.data(),
                                            std::size_t(slot.token_rows) * sizeof(std::int32_t),
                                            cudaMemcpyDeviceToHost, stream_),
                            "cudaMemcpyAsync (drawn tokens)");
          !ok)
        return ok;
    return cuda_ok(cudaEventRecord(slot.done, stream_), "cudaEventRecord");
  }

  LlamaConfig config_;
  int device_;
  cu::DeviceInfo info_;
  std::shared_ptr<CudaPageAllocator> allocator_;
  cudaStream_t stream_ = nullptr;
  cu::Matmul matmul_;
  std::unique_ptr<CudaWeights> weights_;
  StepPlan plan_;
  std::array<StepSlot, kMaxStepsInFlight> slots_;
  std::size_t next_slot_ = 0;
  StepSlot* previous_ = nullptr;         // the step submitted last: its tokens are the futures
  std::deque<StepSlot*> in_flight_;      // submitted, not collected, oldest first
  const std::int32_t* futures_ = nullptr;  // the step being queued: where its future tokens are,
  std::int32_t* tokens_out_ = nullptr;     // and where its drawn tokens go
  bool graphs_ = true;                     // decode steps through a CUDA graph (ARBOR_CUDA_GRAPHS=0: off)
  bool replay_graphs_ = true;              // steady steps replay it (ARBOR_CUDA_GRAPH_REPLAY=0: captured each step)
  bool tensor_core_attention_ = true;      // shared-prefix passes on tensor cores (ARBOR_CUDA_TENSOR_CORE_ATTENTION=0: off)
  GraphCounts graph_counts_;
  // Device activations, [rows][dim] each, and the step's metadata and attention state.
  cu::DeviceBuffer x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_, logits_, ints_, attention_scratch_;
  cu::DeviceBuffer late_masks_;  // the late masks of the step supplied last
};

}  // namespace

Result<std::unique_ptr<Engine>> make_cuda_engine(const LlamaConfig& config, const LlamaWeights& weights,
                                                 kernels::MatmulPrecision precision) {
  if (config.head_dim > cu::kMaxHeadDim || config.head_dim % 2 != 0)
    return fail(ErrorCode::unsupported, "CUDA engine: head_dim " + std::to_string(config.head_dim) +
                                            " is not supported (even, at most " + std::to_string(cu::kMaxHeadDim) +
                                            "); use device 'cpu'");
  const int device = 0;
  cu::DeviceInfo info;
  std::string error;
  if (!cu::device_info(device, info, &error)) return fail(ErrorCode::unsupported, "CUDA engine: " + error);
  auto engine = std::make_unique<CudaEngine>(config, device, std::move(info));
  if (auto ok = engine->init(weights, precision); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace arbor::model
