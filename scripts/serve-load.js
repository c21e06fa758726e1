// serve-load.js: C concurrent streaming clients (the official `openai`
// package) against an OpenAI-compatible server, for scripts/bench-serve.sh.
// usage: node serve-load.js BASE_URL CLIENTS REQUESTS_PER_CLIENT PROMPT_TOKENS GEN_TOKENS N_VOCAB
// Each request is a /v1/completions stream of a prompt of random token ids
// (the same lengths as `faultline bench -npp/-ntg`), ignore_eos. Prints one
// JSON line: time to first token and inter-token gaps (p50/p99, ms), and
// aggregate generated tokens per second over the whole run.
'use strict';
const OpenAI = require('openai');

const [baseURL, clients, perClient, nPrompt, nGen, nVocab] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: process.env.API_KEY || 'none', maxRetries: 0,
                            timeout: 3600 * 1000 });
let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;

const ttft = [], itl = [];
let tokens = 0, chunks = 0, failed = 0;

async function one() {
  const prompt = Array.from({ length: +nPrompt }, () => 1 + Math.floor(rand() * (+nVocab - 1)));
  const t0 = performance.now();
  let last = 0, n = 0;
  try {
    const s = await client.completions.create({
      model: 'm', prompt, max_tokens: +nGen, temperature: 0, stream: true, ignore_eos: true,
      stream_options: { include_usage: true } });
    for await (const c of s) {
      if (c.usage) { tokens += c.usage.completion_tokens; continue; }
      if (!c.choices.length || !c.choices[0].text) continue;
      const t = performance.now();
      chunks++;
      if (n++ === 0) ttft.push(t - t0); else itl.push(t - last);
      last = t;
    }
  } catch (e) {
    failed++;
  }
}

const pct = (a, p) => {
  if (!a.length) return null;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};

(async () => {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: +clients }, async () => {
    for (let i = 0; i < +perClient; i++) await one();
  }));
  const secs = (performance.now() - t0) / 1000;
  if (!tokens) tokens = chunks; // a server without include_usage: a chunk per token
  console.log(JSON.stringify({
    clients: +clients, requests: +clients * +perClient, failed, secs, tokens,
    tps: tokens / secs, ttft_p50: pct(ttft, 50), ttft_p99: pct(ttft, 99),
    itl_p50: pct(itl, 50), itl_p99: pct(itl, 99) }));
})();
