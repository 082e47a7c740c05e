// The workflow run endpoints: POST/GET /v1/runs, GET/DELETE /v1/runs/{id},
// GET /v1/runs/{id}/events.
#include "runtime/server/api.hpp"

namespace arbor::server {

void Api::start_run(const HttpRequest& req, const ExchangePtr& ex, const Principal& p) {
  const std::string route = "/v1/runs";
  auto body = parse_json(req.body);
  if (!body) return reply_error(ex, p.tenant, route, body.error());
  const nlohmann::json& b = *body;
  if (!b.is_object()) return reply_error(ex, p.tenant, route, bad_request("invalid_request", "the body must be a JSON object {\"workflow\": {...}, \"inputs\": {...}}"));
  if (!b.contains("workflow") || !(b["workflow"].is_object() || b["workflow"].is_string()))
    return reply_error(ex, p.tenant, route, invalid_param("/workflow", "is required: a workflow document (object or JSON text)"));
  // Text or object, the loader parses it again (bounded, never throwing) and reads
  // prefix files only as config_.documents() allows.
  const std::string workflow = b["workflow"].is_string() ? b["workflow"].get<std::string>() : b["workflow"].dump();
  std::map<std::string, std::string> inputs;
  if (b.contains("inputs") && !b["inputs"].is_null()) {
    if (!b["inputs"].is_object())
      return reply_error(ex, p.tenant, route, invalid_param("/inputs", "must be an object of input name -> value"));
    for (const auto& [k, v] : b["inputs"].items()) inputs[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  auto slot = admission_.admit(p.tenant, draining_);
  if (!slot) return reply_error(ex, p.tenant, route, slot.error());

  auto entry = std::make_shared<RunEntry>(p.tenant);
  entry->hold_slot(std::move(*slot));  // released when the run settles, or with the entry
  // The backend may call this after the server (and this Api) are gone: it touches the
  // Api only through `defer` (a copy; the server's drops work once it has stopped) or,
  // without one, inline in the caller that owns the Api.
  auto on_event = [this, entry, defer = defer_](const Event& event) {
    if (!entry->publish(event)) return;
    // Finished: settle off the runtime's thread (snapshot() must not run inside a callback).
    auto settle = [this, entry] { finish_run(entry, entry->tenant()); };
    defer ? defer(settle) : settle();
  };
  auto control = backend_.start_run(workflow, inputs, on_event, p.tenant, config_.documents());
  if (!control) {
    entry->take_slot().release();
    ApiError e = from_error(control.error());
    if (e.status == 400) e.code = "invalid_workflow";
    return reply_error(ex, p.tenant, route, e);
  }
  const std::string id = (*control)->id();
  entry->set_control(*control);
  runs_.add(id, entry);
  if (entry->finished()) finish_run(entry, p.tenant);
  nlohmann::ordered_json j;
  j["id"] = id;
  j["object"] = "run";
  j["status"] = RunStatus::running;
  j["tenant"] = p.tenant;
  j["links"] = {{"self", "/v1/runs/" + id}, {"events", "/v1/runs/" + id + "/events"}};
  reply_json(ex, p.tenant, route, 202, dump(j));
}

void Api::finish_run(const std::shared_ptr<RunEntry>& entry, const std::string& tenant) {
  auto control = entry->control();
  if (!control || !entry->settle()) return;
  AdmissionSlot slot = entry->take_slot();  // released on return, after the run is recorded
  const RunResult result = control->wait();  // its run_finished event has been seen
  metrics_.record_run(tenant, result);
  entry->retire(backend_.run_json(result), result.status);  // a summary is all that stays
  runs_.trim();
}

void Api::list_runs(const ExchangePtr& ex, const Principal& p) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& [id, entry] : runs_.list(p.admin ? "" : p.tenant)) {
    auto control = entry->control();
    nlohmann::ordered_json o;
    o["id"] = id;
    o["tenant"] = entry->tenant();
    const auto retired = entry->retired_status();
    o["status"] = retired ? to_string(*retired) : control ? to_string(control->snapshot().status) : "starting";
    data.push_back(std::move(o));
  }
  reply_json(ex, p.tenant, "/v1/runs", 200, dump(nlohmann::ordered_json{{"object", "list"}, {"data", data}}));
}

void Api::run_request(const HttpRequest& req, const ExchangePtr& ex, const Principal& p, const std::string& id,
                      bool events) {
  const std::string route = events ? "/v1/runs/{id}/events" : "/v1/runs/{id}";
  auto entry = runs_.find(id);
  // Another tenant's run answers exactly like a missing one: its existence is private.
  if (!entry || (!p.admin && entry->tenant() != p.tenant))
    return reply_error(ex, p.tenant, route, not_found("no run '" + id + "' for this API key; see GET /v1/runs"));
  auto control = entry->control();
  if (control && control->done()) finish_run(entry, entry->tenant());  // in case its final event was missed
  if (events) {
    metrics_.count_request(p.tenant, route, 200);
    return entry->follow(ex);
  }
  // A retired run answers with its summary (DELETE has nothing left to cancel).
  if (auto document = entry->document()) return reply_json(ex, p.tenant, route, 200, *document);
  if (req.method == "DELETE") control->cancel();
  // After its run_finished event a run reports its final document (the handle
  // catches up within microseconds of the event).
  reply_json(ex, p.tenant, route, 200, backend_.run_json(entry->finished() ? control->wait() : control->snapshot()));
}

}  // namespace arbor::server
