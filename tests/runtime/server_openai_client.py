"""Drives `arbor serve` with the official `openai` package (run by server_openai_py_test).

usage: python3 server_openai_client.py PORT KEY
Exits 0 when every check passes; prints what failed otherwise.
"""
import json
import sys

import openai

port, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=120)

SYSTEM = ("You are a concise assistant for a team of researchers studying the history of "
          "electronics. Answer every question in one short sentence, using plain words.")


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


models = client.models.list()
model = models.data[0].id
check(bool(model), "models.list() names the model")

messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a transistor?"}]
first = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0, seed=1)
text = first.choices[0].message.content
check(first.object == "chat.completion" and text, f"non-streaming chat returns text: {first}")
check(first.usage.completion_tokens == 8, f"usage.completion_tokens == 8: {first.usage}")

second = client.chat.completions.create(
    model=model, messages=[messages[0], {"role": "user", "content": "What is a diode?"}], max_tokens=4, temperature=0)
cached = second.usage.prompt_tokens_details.cached_tokens
check(cached > 0, f"a shared system prompt is cached: cached_tokens={cached}")

pieces, finish, usage = [], None, None
stream = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0, seed=1,
                                        stream=True, stream_options={"include_usage": True})
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
check("".join(pieces) == text, f"streamed text {''.join(pieces)!r} == whole text {text!r}")
check(finish == "length", f"stream finish_reason: {finish}")
check(usage is not None and usage.completion_tokens == 8, f"stream usage: {usage}")

completion = client.completions.create(model=model, prompt="The first transistor was built in", max_tokens=4)
check(completion.choices[0].text is not None and completion.usage.completion_tokens == 4, f"completions: {completion}")

try:
    client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=101)
    check(False, "temperature 101 is refused (the shared range is 0..100)")
except openai.BadRequestError as e:
    check(e.status_code == 400, "400 for an invalid parameter")

try:
    openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="not-a-key-000", max_retries=0).models.list()
    check(False, "an unknown key is refused")
except openai.AuthenticationError as e:
    check(e.status_code == 401, "401 for an unknown key")

# A tool loop as agent frameworks run it: the model calls a tool, the client runs it and
# answers with a tool message, the model continues; whole and streamed.
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                   "required": ["city"], "additionalProperties": False}}}]
TOOL_SYSTEM = ("You are a helpful assistant with access to tools. Call a tool when the question needs it; "
               "when its result comes back, answer the user in one short sentence.")


def weather(arguments):
    return json.dumps({"city": json.loads(arguments)["city"], "temperature_c": 18, "sky": "sunny"})


def streamed_reply(**kwargs):
    """Runs a streamed request; returns (content, [{id, name, arguments}], finish_reason)."""
    content, calls, finish = [], {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            if choice.delta.content:
                content.append(choice.delta.content)
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = d.id or call["id"]
                if d.function and d.function.name:
                    call["name"] += d.function.name
                if d.function and d.function.arguments:
                    call["arguments"] += d.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(content), [calls[i] for i in sorted(calls)], finish


loop = [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": "What is the weather in Paris?"}]
asked = client.chat.completions.create(model=model, messages=loop, tools=TOOLS, tool_choice="required",
                                       max_tokens=64, temperature=0)
choice = asked.choices[0]
check(choice.finish_reason == "tool_calls" and choice.message.tool_calls, f"a required call: {asked}")
call = choice.message.tool_calls[0]
check(call.id.startswith("call_") and call.type == "function" and call.function.name == "get_weather",
      f"the call is well formed: {call}")
check(isinstance(json.loads(call.function.arguments).get("city"), str), f"arguments follow the schema: {call}")
loop.append(choice.message.model_dump(exclude_none=True))
loop.append({"role": "tool", "tool_call_id": call.id, "content": weather(call.function.arguments)})
answer = client.chat.completions.create(model=model, messages=loop, tools=TOOLS, max_tokens=24, temperature=0)
reply = answer.choices[0]
check(reply.message.content or reply.message.tool_calls, f"the model continues after the tool result: {answer}")
tool_cached = answer.usage.prompt_tokens_details.cached_tokens
check(tool_cached >= asked.usage.prompt_tokens // 2,
      f"the second turn reuses the first one's prompt: cached {tool_cached} of {asked.usage.prompt_tokens}")

# Streamed: the same call, in delta.tool_calls chunks (greedy decoding: same name and
# arguments), then the same continuation.
loop = loop[:2]
content, calls, finish = streamed_reply(model=model, messages=loop, tools=TOOLS, tool_choice="required",
                                        max_tokens=64, temperature=0)
check(finish == "tool_calls" and len(calls) == 1, f"a streamed call: {calls} {finish}")
check(calls[0]["name"] == call.function.name and calls[0]["arguments"] == call.function.arguments,
      f"streamed call {calls[0]} == whole call {call}")
loop.append({"role": "assistant", "content": content or None,
             "tool_calls": [{"id": calls[0]["id"], "type": "function",
                             "function": {"name": calls[0]["name"], "arguments": calls[0]["arguments"]}}]})
loop.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": weather(calls[0]["arguments"])})
content, calls, finish = streamed_reply(model=model, messages=loop, tools=TOOLS, max_tokens=24, temperature=0)
check(finish in ("stop", "length", "tool_calls") and (content or calls), f"streamed continuation: {content!r} {calls}")
check(content == (reply.message.content or ""), f"streamed continuation {content!r} == whole {reply.message.content!r}")

try:
    client.chat.completions.create(model=model, messages=loop, tools=TOOLS, max_tokens=4,
                                   tool_choice={"type": "function", "function": {"name": "send_email"}})
    check(False, "a tool_choice naming an unknown tool is refused")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "/tool_choice/function/name" in str(e), f"400 naming the pointer: {e}")

print("ok: openai", openai.__version__, "model", model, "cached_tokens", cached, "tool loop cached", tool_cached)
