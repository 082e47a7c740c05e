// arbor::Runtime on top of the actors: one actor system, one cache actor, one run
// actor per workflow run, one small actor per generate() call. Blocking callers wait
// on the handles' condition variables (or a scoped_actor), never inside an actor.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <thread>

#include "actors/cache_actor.hpp"
#include "actors/run_env.hpp"
#include "common/log.hpp"
#include "model/engine_factory.hpp"
#include "model/unicode.hpp"
#include "model/tool_format.hpp"
#include "runtime/chat_prompt.hpp"
#include "runtime/engine_device.hpp"
#include "runtime/runtime_impl.hpp"
#include "workflows/workflow.hpp"

namespace arbor {
namespace {

cache::EvictionPolicyKind eviction_kind(Eviction eviction) {
  switch (eviction) {
    case Eviction::lru: return cache::EvictionPolicyKind::lru;
    case Eviction::lfu: return cache::EvictionPolicyKind::lfu;
    case Eviction::workflow: return cache::EvictionPolicyKind::priority;
  }
  return cache::EvictionPolicyKind::lru;
}

// The engine RuntimeConfig asks for; `info` gets the line Runtime::device_info() returns.
Result<std::unique_ptr<model::Engine>> make_engine(const RuntimeConfig& c, const model::Model& m, std::string& info) {
  std::string reason;
  auto device = model::resolve_device(engine_device(c.device), &reason);
  if (!device) return std::unexpected(device.error());
  model::EngineOptions options;
  options.device = *device;
  options.num_threads = c.num_threads;
  options.precision = engine_precision(c.precision);
  auto engine = model::make_engine(m, options);
  if (!engine) return std::unexpected(engine.error());
  info = (*engine)->describe() + (reason.empty() ? "" : ", " + reason);
  return engine;
}

// kv_memory_mb, or when it is 0 (automatic) what the engine's device allows, or
// kDefaultHostKvMb of host memory.
constexpr std::size_t kDefaultHostKvMb = 256;

std::size_t kv_pool_size(const RuntimeConfig& c, const model::Engine& engine) {
  if (c.kv_memory_mb > 0) return c.kv_memory_mb << 20;
  return engine.kv_budget_bytes(c.max_step_tokens).value_or(kDefaultHostKvMb << 20);
}

std::string no_page_message(const RuntimeConfig& c, std::size_t pool_bytes, const cache::KvGeometry& g) {
  const std::string page = " (" + std::to_string(g.bytes_per_page()) + " bytes each)";
  if (c.kv_memory_mb > 0) return "kv_memory_mb " + std::to_string(c.kv_memory_mb) + " holds no KV page" + page + "; raise it";
  return "the device has " + std::to_string(pool_bytes) + " bytes left for the KV pool after the weights and the "
         "step workspace, less than one page" + page + "; free device memory, use a smaller model or lower "
         "max_step_tokens";
}

}  // namespace

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Runtime::~Runtime() {
  if (impl_) impl_->shutdown();
}

void Runtime::Impl::shutdown() {
  std::vector<std::shared_ptr<RunHandle::State>> live_runs;
  std::vector<std::shared_ptr<GenerationHandle::State>> live_gens;
  {
    std::lock_guard lock(mu);
    for (auto& w : runs)
      if (auto s = w.lock()) live_runs.push_back(s);
    for (auto& w : generations)
      if (auto s = w.lock()) live_gens.push_back(s);
  }
  for (auto& s : live_runs) {
    RunHandle h(s);
    h.cancel();
    h.wait();
  }
  for (auto& s : live_gens) {
    GenerationHandle h(s);
    h.cancel();
    h.wait();
  }
  tool_runner->shutdown();  // a handler still running stays detached; its result is dropped
  if (cache) caf::anon_send_exit(cache, caf::exit_reason::user_shutdown);
  cache = nullptr;
  system.reset();  // waits for every actor to finish
  actor_config.reset();
}

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeConfig config) {
  if (auto ok = check_config(config); !ok) return std::unexpected(ok.error());
  if (config.model_path.empty()) config.model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto model = model::Model::load(config.model_path);
  if (!model) return std::unexpected(model.error());

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->model = *model;
  impl->chat = std::make_shared<const model::ChatTemplate>(model::ChatTemplate::from_gguf((*model)->file()));

  const auto& mc = (*model)->config();
  cache::KvGeometry geometry;
  geometry.num_layers = mc.num_layers;
  geometry.num_kv_heads = mc.num_kv_heads;
  geometry.head_dim = mc.head_dim;
  geometry.page_size = config.page_size;
  if (!geometry.valid()) return fail(ErrorCode::unsupported, "model '" + config.model_path + "' has no valid KV shape");
  auto engine = make_engine(config, **model, impl->device_info);
  if (!engine) return std::unexpected(engine.error());
  impl->device = model::device_name((*engine)->device());
  impl->kv_pool_bytes = kv_pool_size(config, **engine);
  const std::size_t num_pages = impl->kv_pool_bytes / geometry.bytes_per_page();
  if (num_pages == 0) return fail(ErrorCode::invalid_argument, no_page_message(config, impl->kv_pool_bytes, geometry));
  impl->device_info += ", KV pool " + std::to_string(impl->kv_pool_bytes >> 20) + " MiB" +
                       (config.kv_memory_mb == 0 ? " (automatic)" : "");
  if ((*engine)->asynchronous())
    impl->device_info += std::string(", steps overlapped: ") + (config.overlap ? "on" : "off (--no-overlap)");

  actors::BatchEngineConfig sc;
  sc.model = impl->model;
  sc.engine = std::move(*engine);
  sc.page_size = config.page_size;
  sc.num_pages = int(std::min<std::size_t>(num_pages, std::numeric_limits<int>::max()));  // page ids are int
  sc.eviction = eviction_kind(config.eviction);
  sc.prefix_caching = config.prefix_caching;
  if (!config.overlap) sc.overlap = false;  // else the engine decides (on when asynchronous)
  sc.prefill_chunk = config.prefill_chunk;
  sc.max_step_tokens = config.max_step_tokens;
  sc.max_pinned_pages = int(config.max_pinned_pages);
  sc.max_queued_requests = config.max_queued_requests;
  for (const auto& [name, t] : config.tenants) sc.tenants[name] = cache::TenantConfig{t.quota_pages, t.read_shared};
  sc.kv_events = [hub = impl->kv_events](const KvEvent& e) { hub->publish(e); };

  impl->actor_config = std::make_unique<actors::ActorConfig>();
  impl->system = std::make_unique<caf::actor_system>(*impl->actor_config);
  auto cache = actors::spawn_cache_actor(*impl->system, std::move(sc));
  if (!cache) {
    impl->system.reset();
    return std::unexpected(cache.error());
  }
  impl->cache = *cache;
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

Result<RunResult> Runtime::run(const std::string& workflow_path, const std::map<std::string, std::string>& inputs) {
  auto handle = start(workflow_path, {.inputs = inputs});
  if (!handle) return std::unexpected(handle.error());
  return handle->wait();
}

Result<RunHandle> Runtime::start(const std::string& workflow, RunOptions options) {
  auto plan = options.workflow_is_text ? workflows::load_workflow_text(workflow, options.documents, options.inputs)
                                       : workflows::load_workflow_file(workflow, options.inputs);
  if (!plan) return fail(ErrorCode::invalid_argument, plan.error().format());
  auto shared_plan = std::make_shared<const workflows::Plan>(std::move(*plan));

  auto env = std::make_shared<actors::RunEnv>();
  env->plan = shared_plan;
  env->model = impl_->model;
  env->chat = impl_->chat;
  env->cache = impl_->cache;
  env->tenant = options.tenant ? *options.tenant : shared_plan->tenant;
  if (env->tenant.empty()) env->tenant = "default";
  env->stream_tokens = bool(options.on_event);
  env->warm_prefixes = impl_->config.prefix_caching;  // warming without caching is pure waste
  env->max_requests_at_cache = impl_->config.max_queued_requests;
  env->tool_pin_ttl_ms = impl_->config.prefix_caching ? impl_->config.tool_pin_ttl_ms : 0;
  env->faults = impl_->faults;
  if (auto ok = attach_tools(*impl_, *env, options.workflow_is_text, workflow, options.documents); !ok)
    return std::unexpected(ok.error());

  auto state = std::make_shared<RunHandle::State>();
  state->plan = shared_plan;
  state->callback = std::move(options.on_event);
  state->start = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(impl_->mu);
    env->run_id = "run-" + std::to_string(impl_->next_run++);
    std::erase_if(impl_->runs, [](const auto& w) { return w.expired(); });
    impl_->runs.push_back(state);
  }
  state->result.run_id = env->run_id;
  state->result.workflow = shared_plan->name;
  state->result.tenant = env->tenant;
  state->result.status = RunStatus::running;
  auto run = actors::spawn_run_actor(*impl_->system, env, state);
  {
    std::lock_guard lock(state->mu);
    if (!state->finished) state->run_actor = run;
  }
  caf::anon_send(run, actors::start_atom::value);
  return RunHandle(state);
}

Result<GenerateResult> Runtime::generate(const GenerateRequest& request) {
  auto handle = start_generate(request);
  if (!handle) return std::unexpected(handle.error());
  return handle->result();
}

Result<GenerationHandle> Runtime::start_generate(const GenerateRequest& request,
                                                 std::function<void(const std::string&)> on_token,
                                                 GenerationDone on_done) {
  if (auto ok = check_sampling(request.sampling); !ok)
    return fail(ErrorCode::invalid_argument, "generate: " + ok.error().message);
  const auto& tok = impl_->model->tokenizer();
  auto signatures = request_tools(request);
  if (!signatures) return std::unexpected(signatures.error());
  std::optional<GenerationTools> tools;
  if (!signatures->empty()) {
    tools.emplace();
    tools->forced = request.tool_choice == ToolChoice::required || request.tool_choice == ToolChoice::function;
    tools->none = request.tool_choice == ToolChoice::none;
    std::vector<model::ToolSignature> callable = *signatures;
    if (request.tool_choice == ToolChoice::function)
      std::erase_if(callable, [&](const auto& s) { return s.name != request.tool_choice_name; });
    tools->call_schema = model::tool_call_schema(callable);
  }
  actors::SeqRequest req;
  auto prompt = prompt_ids(request, *signatures, tok, *impl_->chat);
  if (!prompt) return std::unexpected(prompt.error());
  req.prompt = std::move(*prompt);
  req.request_id = actors::next_request_id();
  req.tenant = request.tenant.empty() ? "default" : request.tenant;
  req.sampling = request.sampling;
  if (request.json_schema) req.json_schema = *request.json_schema;

  auto state = std::make_shared<GenerationHandle::State>();
  state->cache = impl_->cache;
  state->request_id = req.request_id;
  state->on_token = std::move(on_token);
  state->on_done = std::move(on_done);
  {
    std::lock_guard lock(impl_->mu);
    std::erase_if(impl_->generations, [](const auto& w) { return w.expired(); });
    impl_->generations.push_back(state);
  }
  impl_->system->spawn(generation_actor, impl_->cache, std::move(req), state, impl_->model, std::move(tools));
  return GenerationHandle(state);
}

CacheStats Runtime::cache_stats() const {
  caf::scoped_actor self{*impl_->system};
  CacheStats stats;
  self->request(impl_->cache, caf::infinite, caf::get_atom::value, actors::stats_atom::value)
      .receive([&](actors::CacheSnapshot& s) { stats = std::move(s); },
               [&](caf::error& err) {  // not swallowed: logged and counted, the stats stay empty
                 ++impl_->cache_stats_failures;
                 log::logger().error("cache_stats: the cache actor did not answer ({}); returning empty stats",
                                     caf::to_string(err));
               });
  return stats;
}

std::string Runtime::check_invariants() const {
  caf::scoped_actor self{*impl_->system};
  std::string violation = "cache actor did not answer";
  self->request(impl_->cache, caf::infinite, caf::get_atom::value, actors::audit_atom::value)
      .receive([&](std::string& v) { violation = std::move(v); }, [](caf::error&) {});
  return violation;
}

std::vector<CacheTreeNode> Runtime::cache_tree(const std::string& tenant, std::size_t max_nodes) const {
  caf::scoped_actor self{*impl_->system};
  std::vector<CacheTreeNode> out;
  self->request(impl_->cache, caf::infinite, actors::TreeRequest{tenant, max_nodes})
      .receive(
          [&](actors::TreeReply& r) {
            const auto& tok = impl_->model->tokenizer();
            out = std::move(r.nodes);
            for (auto& n : out)
              n.snippet = model::unicode::to_valid_utf8(tok.decode(n.first_tokens, true));  // may cut a character
          },
          [](caf::error&) {});
  return out;
}

const RuntimeConfig& Runtime::config() const { return impl_->config; }

std::string Runtime::device() const { return impl_->device; }

std::string Runtime::device_info() const { return impl_->device_info; }
std::size_t Runtime::kv_pool_bytes() const { return impl_->kv_pool_bytes; }

std::string Runtime::model_name() const {
  auto name = impl_->model->file().get_string("general.name");
  if (name && !name->empty()) return *name;
  return std::filesystem::path(impl_->model->path()).stem().string();
}

std::size_t Runtime::context_length() const { return std::size_t(impl_->model->config().context_length); }

}  // namespace arbor
