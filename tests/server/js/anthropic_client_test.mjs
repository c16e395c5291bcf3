// The official `@anthropic-ai/sdk` npm client against a running `promptcache serve`
// (its root URL in PC_SERVER_URL, e.g. http://127.0.0.1:8080: the client adds
// /v1/messages). Exits non-zero on the first failed check. Run by
// tests/server/js_client_test.cc. This SDK version runs on Node's built-in fetch, so it
// needs no transport shim (unlike openai 4's node-fetch, see openai_client_test.mjs).
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: process.env.PC_SERVER_URL, apiKey: "unused", maxRetries: 0 });
const model = process.env.PC_MODEL_ID ?? "stories260K";
const system = [{ type: "text", text: "You tell short stories.", cache_control: { type: "ephemeral", ttl: "5m" } }];
const request = {
  model, max_tokens: 12, temperature: 0, system,
  messages: [{ role: "user", content: "Tell me a story." }],
};

const msg = await client.messages.create(request);
assert.equal(msg.type, "message");
assert.equal(msg.role, "assistant");
assert.ok(msg.id.startsWith("msg_"));
assert.ok(["end_turn", "max_tokens"].includes(msg.stop_reason), msg.stop_reason);
assert.equal(msg.content[0].type, "text");
assert.ok(msg.content[0].text.length > 0);
assert.ok(msg.usage.cache_creation_input_tokens > 0, "the system block is written under a breakpoint");
assert.equal(msg.usage.cache_read_input_tokens, 0);

// Streamed, with the SDK's helper: the deltas add up to the same text; the repeated
// prompt is read from the cache and the usage fields add up to the same prompt.
const stream = client.messages.stream(request);
let streamed = "";
stream.on("text", (t) => { streamed += t; });
const final = await stream.finalMessage();
assert.equal(streamed, msg.content[0].text);
assert.equal(final.content[0].text, msg.content[0].text);
assert.equal(final.stop_reason, msg.stop_reason);
assert.ok(final.usage.cache_read_input_tokens > 0, JSON.stringify(final.usage));
const total = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
assert.equal(total(final.usage), total(msg.usage));
assert.equal(final.usage.output_tokens, msg.usage.output_tokens);

// Raw events in Anthropic's order.
const raw = await client.messages.create({ ...request, stream: true });
const types = [];
for await (const ev of raw) types.push(ev.type);
assert.equal(types[0], "message_start");
assert.equal(types.at(-1), "message_stop");
assert.equal(types.at(-2), "message_delta");
assert.ok(types.includes("content_block_start") && types.includes("content_block_stop"));

// Tools and a tool_use / tool_result history, whole and streamed.
const tools = [{
  name: "get_weather", description: "The weather in a city.",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  cache_control: { type: "ephemeral" },
}];
const history = [
  { role: "user", content: "What is the weather in Paris?" },
  { role: "assistant", content: [
    { type: "text", text: "Let me look." },
    { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
  ] },
  { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "Sunny, 21 C" }] },
];
const withTools = await client.messages.create({ model, max_tokens: 8, temperature: 0, tools, messages: history });
assert.equal(withTools.type, "message");
assert.ok(withTools.usage.cache_creation_input_tokens > 0);
for (const b of withTools.content) {
  assert.ok(["text", "tool_use"].includes(b.type), b.type);
  if (b.type === "tool_use") assert.equal(typeof b.input, "object");
}
const toolStream = client.messages.stream({ model, max_tokens: 8, temperature: 0, tools, messages: history });
const toolFinal = await toolStream.finalMessage();
assert.deepEqual(toolFinal.content, withTools.content);
assert.ok(toolFinal.usage.cache_read_input_tokens > 0);

// countTokens: the prompt /v1/messages renders for the same body.
const counted = await client.messages.countTokens({ model, system, messages: request.messages });
assert.equal(counted.input_tokens, total(msg.usage));
const countedTools = await client.messages.countTokens({ model, tools, messages: history });
assert.equal(countedTools.input_tokens, total(withTools.usage));

// tool_choice any / tool: the reply is a call. The server starts the reply with the
// template's call opener (Qwen: "<tool_call>\n", through the name for a named tool);
// the random test model writes the rest as forced (--test-hooks), and the forced text
// parses as a call only after that prefill.
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const anyCall = await client.messages.create({
  model, max_tokens: 64, temperature: 0, tools, messages: ask, tool_choice: { type: "any" },
  test_forced_reply: '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
});
assert.equal(anyCall.stop_reason, "tool_use", JSON.stringify(anyCall));
assert.equal(anyCall.content.length, 1, JSON.stringify(anyCall.content));
assert.equal(anyCall.content[0].type, "tool_use");
assert.equal(anyCall.content[0].name, "get_weather");
assert.deepEqual(anyCall.content[0].input, { city: "Paris" });
// The prefill counts in the prompt: countTokens (no prefill) is a few tokens fewer.
const askCount = await client.messages.countTokens({ model, tools, messages: ask });
assert.ok(total(anyCall.usage) > askCount.input_tokens, JSON.stringify(anyCall.usage));
const named = { model, max_tokens: 64, temperature: 0, tools, messages: ask,
                tool_choice: { type: "tool", name: "get_weather" },
                test_forced_reply: ', "arguments": {"city": "Rome"}}\n</tool_call>' };
const namedCall = await client.messages.create(named);
assert.equal(namedCall.stop_reason, "tool_use", JSON.stringify(namedCall));
assert.equal(namedCall.content[0].name, "get_weather");
assert.deepEqual(namedCall.content[0].input, { city: "Rome" });
const namedStream = await client.messages.stream(named).finalMessage();
assert.equal(namedStream.stop_reason, "tool_use");
assert.deepEqual(namedStream.content.map((b) => [b.type, b.name, b.input]),
                 namedCall.content.map((b) => [b.type, b.name, b.input]));
// Without the forcing choice the same forced text is no call (it lacks the opener).
const unforced = await client.messages.create({ ...named, tool_choice: { type: "auto" } });
assert.equal(unforced.stop_reason, "end_turn", JSON.stringify(unforced));
assert.equal(unforced.content[0].type, "text");

// Errors come back in Anthropic's shape, as the SDK's typed errors.
await assert.rejects(
  client.messages.create({ model, messages: [{ role: "user", content: "Hi" }] }),
  (e) => e instanceof Anthropic.BadRequestError && e.status === 400 &&
         e.error?.type === "error" && e.error?.error?.type === "invalid_request_error" &&
         /max_tokens/.test(e.error.error.message));
await assert.rejects(
  client.messages.create({ model: "no-such-model", max_tokens: 4, messages: [{ role: "user", content: "Hi" }] }),
  (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error");

// A schema keyword the grammar cannot enforce: a 400 naming its path, never ignored.
await assert.rejects(
  client.messages.create({ ...request, output_config: { format: { type: "json_schema", schema: { type: "string", pattern: "a+" } } } }),
  (e) => e instanceof Anthropic.BadRequestError && /output_config\.format\.schema\.pattern/.test(e.error?.error?.message));
// Errors under /v1/messages/* (an unknown subpath too) are Anthropic's shape.
const notFound = await fetch(`${process.env.PC_SERVER_URL}/v1/messages/nothing`, { method: "POST", body: "{}" });
assert.equal(notFound.status, 404);
const nf = await notFound.json();
assert.equal(nf.type, "error");
assert.equal(nf.error.type, "not_found_error");

console.log("anthropic client: ok");
