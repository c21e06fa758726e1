// serve-load.js: C concurrent streaming clients against an OpenAI-compatible
// server, for scripts/bench-serve.sh.
// usage: node serve-load.js BASE_URL CLIENTS REQUESTS_PER_CLIENT PROMPT_TOKENS GEN_TOKENS N_VOCAB
// Each request is a /v1/completions stream of a prompt of random token ids
// (the same lengths as `faultline bench -npp/-ntg`), ignore_eos. Prints one
// JSON line: time to first token and inter-token gaps (p50/p99, ms), and
// aggregate generated tokens per second over the whole run.
// It reads the event stream itself (fetch), not through the openai package:
// on a model of random weights the text is noise, and a server that sends
// bytes that are not UTF-8 (llama-server does) makes that client throw. An
// event is an arrival (a server may put several tokens in one when the
// client is behind); a request that ends with [DONE] made GEN_TOKENS tokens
// (ignore_eos). EXTRA_BODY (JSON) adds fields to every request body: the
// benchmark gives llama-server a grammar, since on noise it ends a stream with
// an error ("does not match the expected Content-only format").
'use strict';
const [baseURL, clients, perClient, nPrompt, nGen, nVocab] = process.argv.slice(2);
let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;

const extra = JSON.parse(process.env.EXTRA_BODY || '{}');
const ttft = [], itl = [];
let tokens = 0, failed = 0;

async function one() {
  const prompt = Array.from({ length: +nPrompt }, () => 1 + Math.floor(rand() * (+nVocab - 1)));
  const t0 = performance.now();
  let last = 0, n = 0, buf = '', done = false;
  try {
    const res = await fetch(baseURL + '/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json',
                                 Authorization: 'Bearer ' + (process.env.API_KEY || 'none') },
      body: JSON.stringify({ model: 'm', prompt, max_tokens: +nGen, temperature: 0, stream: true,
                             ignore_eos: true, ...extra }) });
    if (!res.ok) throw new Error('status ' + res.status);
    const dec = new TextDecoder('utf-8', { fatal: false });
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!ev.startsWith('data: ')) continue;
        if (ev === 'data: [DONE]') { done = true; continue; }
        let text = '';
        try { text = JSON.parse(ev.slice(6)).choices?.[0]?.text ?? ''; } catch (e) { text = 'x'; }
        if (!text) continue;
        const t = performance.now();
        if (n++ === 0) ttft.push(t - t0); else itl.push(t - last);
        last = t;
      }
    }
    if (done) tokens += +nGen; /* ignore_eos: exactly max_tokens each */
    else failed++;
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
  console.log(JSON.stringify({
    clients: +clients, requests: +clients * +perClient, failed, secs, tokens,
    tps: tokens / secs, ttft_p50: pct(ttft, 50), ttft_p99: pct(ttft, 99),
    itl_p50: pct(itl, 50), itl_p99: pct(itl, 99) }));
})();
