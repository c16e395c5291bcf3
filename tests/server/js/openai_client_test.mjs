// The official `openai` npm client against a running `promptcache serve`
// (base URL in PC_SERVER_URL, e.g. http://127.0.0.1:8080/v1). Exits non-zero on
// the first failed check. Run by tests/server/js_client_test.cc.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.PC_SERVER_URL, apiKey: "unused", maxRetries: 0 });
const model = process.env.PC_MODEL_ID ?? "stories260K";

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 0,
});
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.ok(chat.choices[0].message.content.length > 0);
assert.equal(typeof chat.usage.prompt_tokens_details.cached_tokens, "number");

let streamed = "";
let usage = null;
const chatStream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 0,
  stream: true, stream_options: { include_usage: true },
});
for await (const chunk of chatStream) {
  if (chunk.usage) usage = chunk.usage;
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
assert.equal(streamed, chat.choices[0].message.content);
assert.ok(usage && usage.prompt_tokens_details.cached_tokens > 0, "the repeated prompt hits");

const completion = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0,
});
assert.equal(completion.object, "text_completion");
assert.ok(completion.choices[0].text.length > 0);

let text = "";
const stream = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true,
});
for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
assert.equal(text, completion.choices[0].text);

// Tool calls (the server runs with --test-hooks: test_forced_reply makes the model
// write the given reply, here a call in the Qwen2.5 template's format).
const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const callText = (city) =>
  `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"}}\n</tool_call>`;
const history = [{ role: "user", content: "Weather in Paris?" }];
const toolTurn = await client.chat.completions.create({
  model, messages: history, tools, temperature: 0, test_forced_reply: "Checking.\n" + callText("Paris"),
});
assert.equal(toolTurn.choices[0].finish_reason, "tool_calls");
const toolMsg = toolTurn.choices[0].message;
assert.equal(toolMsg.content, "Checking.");
assert.equal(toolMsg.tool_calls.length, 1);
assert.equal(toolMsg.tool_calls[0].type, "function");
assert.equal(toolMsg.tool_calls[0].function.name, "get_weather");
assert.deepEqual(JSON.parse(toolMsg.tool_calls[0].function.arguments), { city: "Paris" });
assert.match(toolMsg.tool_calls[0].id, /^call_[A-Za-z0-9]{24}$/);

// Streamed: the raw chunks, and the client's own accumulation of them.
const toolStream = await client.chat.completions.create({
  model, messages: history, tools, temperature: 0, stream: true,
  test_forced_reply: "Checking.\n" + callText("Paris"),
});
let streamedContent = "";
const streamedCalls = [];
let streamedFinish = null;
for await (const chunk of toolStream) {
  const choice = chunk.choices[0];
  if (!choice) continue;
  streamedContent += choice.delta?.content ?? "";
  for (const tc of choice.delta?.tool_calls ?? []) {
    if (tc.id) streamedCalls[tc.index] = { id: tc.id, name: tc.function.name, arguments: tc.function.arguments };
    else streamedCalls[tc.index].arguments += tc.function.arguments;
  }
  if (choice.finish_reason) streamedFinish = choice.finish_reason;
}
assert.equal(streamedFinish, "tool_calls");
assert.equal(streamedContent, "Checking.");
assert.equal(streamedCalls.length, 1);
assert.equal(streamedCalls[0].name, "get_weather");
assert.equal(streamedCalls[0].arguments, toolMsg.tool_calls[0].function.arguments);
const runner = client.chat.completions.stream({
  model, messages: history, tools, temperature: 0, test_forced_reply: callText("Oslo"),
});
const final = await runner.finalChatCompletion();
assert.equal(final.choices[0].finish_reason, "tool_calls");
assert.equal(final.choices[0].message.tool_calls[0].function.name, "get_weather");
assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), { city: "Oslo" });

// The next turn sends the assistant message back as the client returned it
// (arguments a JSON string, content as given) with the tool's result: it hits the
// whole previous prompt and reply but the final end-of-generation token.
const next = await client.chat.completions.create({
  model, tools, temperature: 0, test_forced_reply: "It is sunny in Paris.",
  messages: [...history, toolMsg, { role: "tool", tool_call_id: toolMsg.tool_calls[0].id, content: "Sunny, 21 C" }],
});
assert.equal(next.choices[0].finish_reason, "stop");
assert.equal(next.choices[0].message.content, "It is sunny in Paris.");
assert.equal(next.usage.prompt_tokens_details.cached_tokens,
             toolTurn.usage.prompt_tokens + toolTurn.usage.completion_tokens - 1);

const models = await client.models.list();
assert.equal(models.data[0].id, model);

await assert.rejects(
  client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
  (e) => e.status === 404,
);
console.log("openai js client: all checks passed");
