// The tool-call format (issue 11 section 3): how tools are described to the model, how
// it calls one and how the result comes back. SmolLM2's GGUF chat template (and every
// family in chat_template.hpp) defines no tool format, so Arbor uses the Hermes one
// (NousResearch Hermes 2 Pro; Qwen2.5 uses the same tags):
//
//   system block (its own segment, right after the shared prefix's system block):
//     # Tools ... <tools>
//     {"type":"function","function":{"name":...,"description":...,"parameters":{...}}}
//     </tools> ... <tool_call>...</tool_call> instructions
//   assistant: optional text, then <tool_call>\n{"name":"calculator","arguments":{...}}\n</tool_call>
//   user:      <tool_response>\n{result}\n</tool_response>
//
// The JSON between the tags is generated under tool_call_schema(): an object whose
// "name" is one of the tools (a const) and whose "arguments" follow that tool's schema.
//
// Pure text functions; thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "model/json_schema.hpp"

namespace arbor::model {

struct ToolSignature {
  std::string name;
  std::string description;
  std::string parameters;  // JSON Schema (compact text, key order = generation order) of the arguments
};

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
// A call is written <tool_call>\n{JSON}\n</tool_call>, Hermes's layout: the newlines
// keep the tags and the JSON in separate pre-tokens, so the ids of a call rendered back
// as text are the ids it was generated with (">{" would merge into one token).
inline constexpr std::string_view kToolCallHead = "<tool_call>\n";
inline constexpr std::string_view kToolCallTail = "\n</tool_call>";

// The system block that describes `tools` (in the order given: the same list gives the
// same bytes, so agents with the same prefix and tools share its KV pages too).
std::string tools_system_text(std::span<const ToolSignature> tools);

// The JSON Schema of one call of any of `tools`: {"name": const, "arguments": schema},
// an anyOf over the tools when there are several.
std::string tool_call_schema(std::span<const ToolSignature> tools);

// The user message that carries a tool's result back to the model.
std::string tool_response_text(std::string_view result);

struct ToolCall {
  std::string name;
  Json arguments;
  // The arguments as written in the document (not re-serialized: "1.50" stays "1.50"),
  // so that tool_call_text() renders the call back to the bytes the model generated.
  std::string arguments_text = {};
};

// A name a tool call may carry (OpenAI's function-name rule): 1..64 ASCII letters,
// digits, '_' or '-'.
bool valid_function_name(std::string_view name);

// Reads a call document generated under tool_call_schema().
Result<ToolCall> parse_tool_call(std::string_view json_text);

// A call as the model writes it in an assistant message:
//   <tool_call>\n{"name":NAME,"arguments":ARGUMENTS}\n</tool_call>
// (the generation form of tool_call_schema: compact, name first). `arguments_json` is
// put in as given: with a ToolCall's arguments_text the bytes are the generated ones,
// so a conversation sent back in full matches its cached history.
std::string tool_call_text(std::string_view name, std::string_view arguments_json);

}  // namespace arbor::model
