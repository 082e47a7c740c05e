"""Drives `arbor serve` with the official `openai` package (run by server_openai_py_test).

usage: python3 server_openai_client.py PORT KEY
Exits 0 when every check passes; prints what failed otherwise.
"""
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
    client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=7)
    check(False, "temperature 7 is refused")
except openai.BadRequestError as e:
    check(e.status_code == 400, "400 for an invalid parameter")

try:
    openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="not-a-key-000", max_retries=0).models.list()
    check(False, "an unknown key is refused")
except openai.AuthenticationError as e:
    check(e.status_code == 401, "401 for an unknown key")

print("ok: openai", openai.__version__, "model", model, "cached_tokens", cached)
