// A Backend for fuzzing the server's Api without a model or threads: generations and
// runs complete synchronously, inside the start call (the Backend contract allows
// callbacks before start returns). Runs go through the real workflow loader, so a
// workflow posted over HTTP is checked exactly as the runtime checks it.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/server/backend.hpp"
#include "workflows/workflow.hpp"

namespace arbor::fuzz {

class SyncBackend final : public server::Backend {
 public:
  std::string model_name() const override { return "fuzz-model"; }
  std::size_t context_length() const override { return 2048; }

  Result<std::shared_ptr<server::Generation>> start_generate(
      const GenerateRequest& request, std::function<void(const std::string&)> on_token,
      std::function<void(const Result<GenerateResult>&)> on_done) override {
    const std::string text = request.raw_prompt ? *request.raw_prompt : request.messages.back().content;
    if (text.size() > context_length()) return fail(ErrorCode::too_long, "fuzz: the prompt is too long");
    GenerateResult result;
    result.prompt_tokens = result.computed_tokens = text.size();
    // The prompt echoed back in pieces of 3 bytes (which may split a character).
    for (std::size_t i = 0; i < text.size() && result.generated_tokens < std::size_t(request.sampling.max_tokens);
         i += 3, ++result.generated_tokens) {
      const std::string piece = text.substr(i, 3);
      if (on_token) on_token(piece);
      result.text += piece;
    }
    result.finish_reason = result.text.size() < text.size() ? FinishReason::length : FinishReason::stop;
    on_done(result);
    return std::shared_ptr<server::Generation>(std::make_shared<NoGeneration>());
  }

  Result<std::shared_ptr<server::RunControl>> start_run(const std::string& workflow_json,
                                                        const std::map<std::string, std::string>& inputs,
                                                        EventCallback on_event, const std::string& tenant,
                                                        const DocumentAccess& documents) override {
    auto plan = workflows::load_workflow_text(workflow_json, documents, inputs, "<request>");
    if (!plan) return fail(ErrorCode::invalid_argument, plan.error().format());
    auto run = std::make_shared<Run>();
    run->result.run_id = "run-" + std::to_string(++num_runs_);
    run->result.tenant = tenant;
    run->result.workflow = plan->name;
    run->result.status = RunStatus::ok;
    auto emit = [&](Event::Kind kind, const std::string& agent, const std::string& text) {
      Event e;
      e.kind = kind;
      e.run_id = run->result.run_id;
      e.agent_id = agent;
      e.text = text;
      if (kind == Event::Kind::agent_finished) e.status = AgentStatus::ok;
      if (kind == Event::Kind::run_finished) e.status = RunStatus::ok;
      on_event(e);
    };
    emit(Event::Kind::run_started, "", "");
    plan->visit([&](const workflows::AgentPlan& a) {
      // The agent's output: its task as written (any bytes the client sent).
      const std::string output = a.task ? a.task->source() : a.id;
      emit(Event::Kind::agent_started, a.id, "");
      emit(Event::Kind::token, a.id, output.substr(0, output.size() / 2));
      emit(Event::Kind::token, a.id, output.substr(output.size() / 2));
      emit(Event::Kind::agent_finished, a.id, output);
      AgentResult agent;
      agent.id = a.id;
      agent.parent = a.parent_id;
      agent.status = AgentStatus::ok;
      agent.output = output;
      run->result.agents.push_back(std::move(agent));
    });
    emit(Event::Kind::run_finished, "", "");
    return std::shared_ptr<server::RunControl>(run);
  }

  std::string run_json(const RunResult& r) const override {
    nlohmann::json agents = nlohmann::json::array();
    for (const auto& a : r.agents) agents.push_back({{"id", a.id}, {"output", a.output}});
    return nlohmann::json{{"run_id", r.run_id}, {"status", r.status}, {"agents", agents}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  CacheStats cache_stats() const override {
    CacheStats s;
    s.pages_total = 8;
    s.tenants["t"].used_pages = 1;
    return s;
  }
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const override {
    CacheTreeNode n;
    n.id = 1;
    n.snippet = tenant;  // echoes a client-chosen name (admin's ?tenant=)
    return {n};
  }

 private:
  struct NoGeneration : server::Generation {
    void cancel() override {}
  };
  struct Run : server::RunControl {
    RunResult result;
    std::string id() const override { return result.run_id; }
    bool done() const override { return true; }
    RunResult snapshot() const override { return result; }
    RunResult wait() override { return result; }
    void cancel() override {}
  };
  int num_runs_ = 0;
};

}  // namespace arbor::fuzz
