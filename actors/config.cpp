#include "actors/config.hpp"

#include <atomic>

#include "actors/messages.hpp"

namespace arbor::actors {

ActorConfig::ActorConfig() {
  // The cache actor computes on its own (detached) thread and its engine's pool; every
  // other actor only routes messages. One CAF worker that stops polling quickly leaves
  // the cores to the engine: with CAF's defaults (a worker per core, aggressive
  // polling) idle workers steal CPU from the engine's pool and halve decode speed.
  set("scheduler.max-threads", std::size_t{1});
  set("work-stealing.aggressive-poll-attempts", std::size_t{20});
  set("work-stealing.moderate-poll-attempts", std::size_t{50});
  set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(200)});
  add_message_type<SamplingSettings>("arbor.SamplingSettings");
  add_message_type<TokenUsage>("arbor.TokenUsage");
  add_message_type<SeqRequest>("arbor.SeqRequest");
  add_message_type<SeqResult>("arbor.SeqResult");
  add_message_type<TokenEvent>("arbor.TokenEvent");
  add_message_type<CancelRequest>("arbor.CancelRequest");
  add_message_type<CancelRun>("arbor.CancelRun");
  add_message_type<PinRequest>("arbor.PinRequest");
  add_message_type<PinReply>("arbor.PinReply");
  add_message_type<UnpinRequest>("arbor.UnpinRequest");
  add_message_type<PriorityRequest>("arbor.PriorityRequest");
  add_message_type<TenantCacheStats>("arbor.TenantCacheStats");
  add_message_type<CacheStats>("arbor.CacheStats");
  add_message_type<CacheSnapshot>("arbor.CacheSnapshot");
  add_message_type<TreeRequest>("arbor.TreeRequest");
  add_message_type<CacheTreeNode>("arbor.CacheTreeNode");
  add_message_type<TreeReply>("arbor.TreeReply");
  add_message_type<ToolCallRecord>("arbor.ToolCallRecord");
  add_message_type<ToolDone>("arbor.ToolDone");
  add_message_type<ToolEvent>("arbor.ToolEvent");
  add_message_type<AgentReport>("arbor.AgentReport");
  add_message_type<AgentStarted>("arbor.AgentStarted");
  add_message_type<DepsRequest>("arbor.DepsRequest");
  add_message_type<DepsReply>("arbor.DepsReply");
}

std::uint64_t next_request_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace arbor::actors
