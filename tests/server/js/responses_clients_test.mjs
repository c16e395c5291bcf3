// The Responses API (POST /v1/responses) with the real npm clients against a running
// `promptcache serve --test-hooks` (base URL in PC_SERVER_URL, e.g.
// http://127.0.0.1:8080/v1): openai `responses.create` (plain, streamed, a function
// tool round trip, previous_response_id continuing as a cache hit), @openai/agents
// with its default (Responses) model and a function tool, the AI SDK's generateText
// on openai() (Responses), and LangChain's ChatOpenAI with useResponsesApi. Exits
// non-zero on the first failed check. Run by tests/server/js_client_test.cc.
//
// The random test model cannot decide to call a tool: a fetch wrapper gives each
// /responses request the --test-hooks field test_forced_reply — a call of get_weather
// in the Qwen2.5 template's format while the input has no tool output yet, then a
// plain answer.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { Agent, run, tool as agentTool, setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";
import { generateText, stepCountIs, tool as aiTool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const baseURL = process.env.PC_SERVER_URL;
const model = process.env.PC_MODEL_ID ?? "stories260K";
const callText = (city) =>
  `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"}}\n</tool_call>`;

// Forces replies for requests with function tools; records every /responses body.
const sent = [];
const forcing = async (url, init) => {
  if (String(url).endsWith("/responses") && init?.body) {
    const body = JSON.parse(init.body);
    sent.push(body);
    const items = Array.isArray(body.input) ? body.input : [];
    const hasFunctions = (body.tools ?? []).some((t) => t.type === "function");
    if (hasFunctions && body.test_forced_reply === undefined)
      body.test_forced_reply = items.some((i) => i.type === "function_call_output")
        ? "It is sunny in Paris." : callText("Paris");
    init = { ...init, body: JSON.stringify(body) };
  }
  return fetch(url, init);
};

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });

// ---- openai: plain, streamed, function tool round trip, previous_response_id ----
const plain = await client.responses.create({
  model, input: "Tell me a story.", instructions: "You tell stories.", max_output_tokens: 12, temperature: 0,
});
assert.equal(plain.object, "response");
assert.ok(["completed", "incomplete"].includes(plain.status), plain.status);  // incomplete: 12 tokens
assert.ok(plain.output_text.length > 0);
assert.ok(plain.usage.output_tokens > 0 && plain.usage.output_tokens <= 12);
assert.equal(typeof plain.usage.input_tokens_details.cached_tokens, "number");
assert.equal(typeof plain.promptcache.cached_tokens, "number");

const events = [];
let streamedText = "";
const stream = await client.responses.create({
  model, input: "Tell me a story.", instructions: "You tell stories.", max_output_tokens: 12, temperature: 0,
  stream: true,
});
for await (const ev of stream) {
  events.push(ev.type);
  if (ev.type === "response.output_text.delta") streamedText += ev.delta;
}
assert.equal(streamedText, plain.output_text);
assert.equal(events[0], "response.created");
assert.equal(events[1], "response.in_progress");
assert.equal(events.at(-1), plain.status === "completed" ? "response.completed" : "response.incomplete");
for (const t of ["response.output_item.added", "response.content_part.added", "response.output_text.done",
                 "response.content_part.done", "response.output_item.done"])
  assert.ok(events.includes(t), t);
// The stream helper accumulates the events into the final response.
const helper = client.responses.stream({
  model, input: "Tell me a story.", instructions: "You tell stories.", temperature: 0,
  test_forced_reply: "Once upon a time.",
});
const helped = await helper.finalResponse();
assert.equal(helped.status, "completed");
assert.equal(helped.output_text, "Once upon a time.");
assert.ok(helped.usage.input_tokens_details.cached_tokens > 0, "the repeated prompt hits");

const tools = [{
  type: "function", name: "get_weather", description: "Current weather in a city", strict: false,
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}, { type: "web_search" }];
const input = [{ role: "user", content: "Weather in Paris?" }];
const toolTurn = await client.responses.create({
  model, input, tools, temperature: 0, test_forced_reply: "Checking.\n" + callText("Paris"),
});
const call = toolTurn.output.find((i) => i.type === "function_call");
assert.ok(call, JSON.stringify(toolTurn.output));
assert.equal(call.name, "get_weather");
assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
assert.match(call.call_id, /^call_[A-Za-z0-9]{24}$/);
assert.deepEqual(toolTurn.promptcache.ignored_tools, ["web_search"]);
// The output items go back as they came, with the tool's result.
const answer = await client.responses.create({
  model, tools, temperature: 0, test_forced_reply: "It is sunny in Paris.",
  input: [...input, ...toolTurn.output, { type: "function_call_output", call_id: call.call_id, output: "Sunny, 21 C" }],
});
assert.equal(answer.output_text, "It is sunny in Paris.");
assert.equal(answer.usage.input_tokens_details.cached_tokens,
             toolTurn.usage.input_tokens + toolTurn.usage.output_tokens - 1);

// The same loop by previous_response_id: only the new items are sent.
const first = await client.responses.create({
  model, input: "Weather in Oslo?", tools, temperature: 0, test_forced_reply: callText("Oslo"),
});
const firstCall = first.output.find((i) => i.type === "function_call");
const continued = await client.responses.create({
  model, tools, temperature: 0, previous_response_id: first.id, test_forced_reply: "Cold in Oslo.",
  input: [{ type: "function_call_output", call_id: firstCall.call_id, output: "-3 C" }],
});
assert.equal(continued.previous_response_id, first.id);
assert.equal(continued.output_text, "Cold in Oslo.");
assert.equal(continued.usage.input_tokens_details.cached_tokens,
             first.usage.input_tokens + first.usage.output_tokens - 1);
const fetched = await client.responses.retrieve(continued.id);
assert.equal(fetched.output_text, "Cold in Oslo.");
await client.responses.delete(continued.id);
await assert.rejects(client.responses.retrieve(continued.id), (e) => e.status === 404);
await assert.rejects(
  client.responses.create({ model, input: "x", previous_response_id: continued.id }),
  (e) => e.status === 404 && e.param === "previous_response_id",
);
console.log("openai responses: ok");

// ---- @openai/agents: the default model (Responses) runs the tool and answers ----
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, fetch: forcing }));
let toolRuns = 0;
const getWeather = agentTool({
  name: "get_weather", description: "Current weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    toolRuns++;
    return `Sunny, 21 C in ${city}`;
  },
});
const agent = new Agent({
  name: "Weather", instructions: "Answer with the weather.", model, tools: [getWeather],
  modelSettings: { temperature: 0 },
});
sent.length = 0;
const result = await run(agent, "What is the weather in Paris?");
assert.equal(toolRuns, 1);
assert.equal(result.finalOutput, "It is sunny in Paris.");
assert.equal(sent.length, 2);
assert.ok(sent[1].input.some((i) => i.type === "function_call_output" && i.output.includes("Sunny")),
          JSON.stringify(sent[1].input));
console.log("@openai/agents: ok");

// ---- AI SDK: generateText on openai() (the Responses API) with a tool ----
const provider = createOpenAI({ baseURL, apiKey: "unused", fetch: forcing });
let aiToolRuns = 0;
const generated = await generateText({
  model: provider(model), temperature: 0, prompt: "What is the weather in Paris?", stopWhen: stepCountIs(3),
  tools: {
    get_weather: aiTool({
      description: "Current weather in a city", inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        aiToolRuns++;
        return `Sunny, 21 C in ${city}`;
      },
    }),
  },
});
assert.equal(aiToolRuns, 1);
assert.equal(generated.text, "It is sunny in Paris.");
assert.equal(generated.steps.length, 2);
const plainText = await generateText({ model: provider(model), prompt: "Tell me a story.", maxOutputTokens: 8 });
assert.ok(plainText.text.length > 0);
assert.equal(typeof plainText.usage.inputTokens, "number");
console.log("ai sdk: ok");

// ---- LangChain: ChatOpenAI with useResponsesApi ----
const llm = new ChatOpenAI({
  model, apiKey: "unused", useResponsesApi: true, temperature: 0, maxRetries: 0,
  configuration: { baseURL, fetch: forcing },
});
const story = await llm.invoke("Tell me a story.");
assert.ok(typeof story.content === "string" ? story.content.length > 0 : story.content.length > 0);
const withTools = llm.bindTools([{
  type: "function",
  function: { name: "get_weather", description: "Current weather in a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}]);
const lcCall = await withTools.invoke("What is the weather in Paris?");
assert.equal(lcCall.tool_calls.length, 1);
assert.equal(lcCall.tool_calls[0].name, "get_weather");
assert.deepEqual(lcCall.tool_calls[0].args, { city: "Paris" });
let lcStreamed = "";
for await (const chunk of await llm.stream("Tell me a story.")) {
  lcStreamed += typeof chunk.content === "string" ? chunk.content
    : chunk.content.map((p) => p.text ?? "").join("");
}
assert.ok(lcStreamed.length > 0);
console.log("langchain: ok");
console.log("responses js clients: all checks passed");
