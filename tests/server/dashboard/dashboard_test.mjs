// Drives headless chromium (puppeteer-core) against a running `promptcache serve`
// started with API keys for tenants alice (PC_KEY_A) and bob (PC_KEY_B):
//   - after a few requests alice's page shows her entry count and hit rate;
//   - pin on the page pins the entry (checked through the cache API);
//   - bob's page shows none of alice's namespaces.
// Writes a screenshot to PC_SCREENSHOT. Exits non-zero on any failure; bounded to 90 s.
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

const url = process.env.PC_SERVER_URL;
const keyA = process.env.PC_KEY_A;
const keyB = process.env.PC_KEY_B;
const shot = process.env.PC_SCREENSHOT;
const chromium = process.env.PC_CHROMIUM || "/usr/bin/chromium";
setTimeout(() => { console.error("dashboard test: timed out"); process.exit(2); }, 90_000).unref();

async function api(key, path, body) {
  const r = await fetch(url + path, {
    method: body === undefined ? "GET" : "POST",
    headers: {Authorization: "Bearer " + key, "Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const j = await r.json();
  assert.ok(r.ok, path + ": " + JSON.stringify(j));
  return j;
}

// Alice: one prompt twice (the second reuses the first's KV), then another prompt.
const story = "Once upon a time there was a little girl named Lily who loved to play in the park with her dog. ";
let prompt = 0, cached = 0;
for (const [text, salt] of [[story.repeat(4), "secret-salt"], [story.repeat(4), "secret-salt"], [story.repeat(3) + "The end.", undefined]]) {
  const body = {prompt: text, max_tokens: 3, temperature: 0};
  if (salt) body.cache_salt = salt;
  const r = await api(keyA, "/v1/completions", body);
  prompt += r.usage.prompt_tokens;
  cached += r.usage.prompt_tokens_details.cached_tokens;
}
assert.ok(cached > 0, "the repeated prompt hit the cache");
const entries = await api(keyA, "/v1/cache/entries");
const expectedEntries = entries.namespaces.reduce((n, ns) => n + ns.entries.length, 0);
assert.ok(expectedEntries >= 2, "alice has entries in two namespaces");

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 1200});
  await page.goto(url + "/dashboard");
  // Without a key the page says it needs one (401), and shows nothing of alice's.
  await page.waitForFunction(() => /API key/.test(document.getElementById("status").textContent), {timeout: 20_000});
  await page.type("#key", keyA);
  await page.click("#connect");
  await page.waitForFunction((n) => document.getElementById("entry-count").dataset.value === String(n),
                             {timeout: 20_000}, expectedEntries);
  const rate = Number(await page.$eval("#hit-rate", (e) => e.dataset.value));
  assert.ok(Math.abs(rate - cached / prompt) < 1e-9, `hit rate on the page ${rate}, from the responses ${cached / prompt}`);
  assert.equal(await page.$eval("#request-count", (e) => e.textContent), "3");
  assert.equal(await page.$eval("#ns-count", (e) => e.dataset.value), "2");
  // The history chart and request list show the three requests.
  await page.waitForFunction(() => document.querySelectorAll("#requests tr").length === 4, {timeout: 10_000});

  // Pin the first memory entry from the page; the cache API shows it pinned.
  const target = await page.$eval("#entries tr[data-entry]", (tr) => ({id: tr.dataset.entry, ns: tr.dataset.ns}));
  await page.click(`#entries tr[data-entry="${target.id}"] button[data-action="pin"]`);
  let pinned = false;
  for (let i = 0; i < 50 && !pinned; ++i) {
    const now = await api(keyA, "/v1/cache/entries");
    pinned = now.namespaces.some((ns) => ns.namespace === target.ns &&
                                         ns.entries.some((e) => String(e.id) === target.id && e.pinned));
    if (!pinned) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(pinned, `entry ${target.id} pinned through the page`);
  await page.waitForFunction((id) => document.querySelector(`#entries tr[data-entry="${id}"] td.pinned`) !== null,
                             {timeout: 10_000}, target.id);
  await page.screenshot({path: shot, fullPage: true});

  // Bob's page: his own (empty) namespace only, nothing of alice's.
  const other = await browser.newPage();
  await other.goto(url + "/dashboard");
  await other.type("#key", keyB);
  await other.click("#connect");
  await other.waitForFunction(() => document.getElementById("scope").textContent === "tenant bob", {timeout: 20_000});
  await other.waitForFunction(() => document.getElementById("ns-count").dataset.value === "1", {timeout: 20_000});
  const text = await other.evaluate(() => document.body.innerText);
  assert.ok(!text.includes("alice") && !text.includes("secret-salt"), "bob's page shows alice's namespaces: " + text);
  assert.equal(await other.$eval("#entry-count", (e) => e.dataset.value), "0");
  assert.equal(await other.$eval("#request-count", (e) => e.textContent), "0");
  console.log("dashboard test: passed");
} finally {
  await browser.close();
}
