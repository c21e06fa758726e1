// serve-client.js: the official `openai` package against `faultline serve`
// (tests/test-serve.sh runs it). usage: node serve-client.js MODE BASE_URL KEY
//   basic   plain and streamed chat and completions; streamed text == plain
//           text at temperature 0; seeded sampling repeats; usage; errors
//           the client raises (400, 401)
//   concurrent  16 clients at once, each text equal to its lone run
//   abandon  a long stream aborted after its first chunks
//   soak N C  N requests from C clients (plain and streamed; every 7th
//           stream abandoned); every finished response well-formed
// Prints one line per check; exits 1 on the first failure.
'use strict';
const OpenAI = require('openai');

const [mode, baseURL, apiKey, ...rest] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const fail = (msg) => { console.log('FAIL: ' + msg); process.exit(1); };
const ok = (cond, msg) => { if (!cond) fail(msg); };

async function chat(content, opts = {}) {
  const r = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0, ...opts });
  ok(r.object === 'chat.completion' && r.id && r.created > 0 && r.model, 'chat: fields ' + JSON.stringify(r));
  ok(r.choices.length === 1 && r.choices[0].message.role === 'assistant', 'chat: choice');
  ok(['stop', 'length'].includes(r.choices[0].finish_reason), 'chat: finish_reason');
  ok(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0 &&
     r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'chat: usage');
  return r.choices[0].message.content;
}

async function chatStream(content, opts = {}, abortAfter = 0) {
  const ac = new AbortController();
  const s = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0,
    stream: true, stream_options: { include_usage: true }, ...opts }, { signal: ac.signal });
  let text = '', finish = null, usage = null, n = 0, id = null;
  try {
    for await (const c of s) {
      id = c.id;
      ok(c.object === 'chat.completion.chunk', 'stream: object ' + c.object);
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        text += ch.delta?.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      if (abortAfter && ++n >= abortAfter) { ac.abort(); return null; }
    }
  } catch (e) {
    if (abortAfter) return null;
    console.log('stream ' + id + ' failed after ' + JSON.stringify(text));
    throw e;
  }
  ok(finish === 'stop' || finish === 'length', 'stream: finish_reason ' + finish + ', text ' + JSON.stringify(text));
  ok(usage && usage.completion_tokens > 0, 'stream: no usage chunk');
  return text;
}

async function complete(prompt, opts = {}) {
  const r = await client.completions.create({ model: 'm', prompt, max_tokens: 10, temperature: 0, ...opts });
  ok(r.object === 'text_completion' && r.choices.length === 1, 'completion: fields');
  return r.choices[0].text;
}

async function completeStream(prompt, opts = {}) {
  const s = await client.completions.create({ model: 'm', prompt, max_tokens: 10, temperature: 0,
                                              stream: true, ...opts });
  let text = '';
  for await (const c of s) text += c.choices[0]?.text ?? '';
  return text;
}

async function expectStatus(status, fn, what) {
  try {
    await fn();
  } catch (e) {
    ok(e instanceof OpenAI.APIError && e.status === status,
       `${what}: wanted ${status}, got ${e.status} ${e.message}`);
    ok(e.error && typeof e.error.message === 'string', `${what}: no error.message`);
    return;
  }
  fail(`${what}: no error`);
}

async function basic() {
  const plain = await chat('Say hello');
  const streamed = await chatStream('Say hello');
  ok(plain === streamed, `streamed != plain: ${JSON.stringify(streamed)} vs ${JSON.stringify(plain)}`);
  console.log('chat plain = streamed: ' + JSON.stringify(plain));
  const c1 = await complete('Once upon a time');
  ok(c1 === await completeStream('Once upon a time'), 'completion streamed != plain');
  const s1 = await complete('The sea', { temperature: 0.9, seed: 11 });
  const s2 = await complete('The sea', { temperature: 0.9, seed: 11 });
  ok(s1 === s2, 'seeded sampling differs between two runs');
  console.log('completions plain = streamed; seeded sampling repeats');
  const list = await client.models.list();
  ok(list.data.length === 1 && list.data[0].object === 'model', 'models.list');
  await expectStatus(400, () => client.chat.completions.create({ model: 'm', messages: [] }), 'empty messages');
  await expectStatus(400, () => client.completions.create({ model: 'm', prompt: 'x', temperature: 'hot' }),
                     'temperature "hot"');
  await expectStatus(400, () => client.completions.create({ model: 'm', prompt: 'x', n: 3 }), 'n: 3');
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectStatus(401, () => bad.models.list(), 'wrong key');
  console.log('errors: 400 (bad messages, types, n), 401 (wrong key) as APIError');
}

async function concurrent() {
  const prompts = Array.from({ length: 16 }, (_, i) => `Tell me about the number ${i * 7}`);
  const alone = [];
  for (const p of prompts) alone.push(await chat(p, { max_tokens: 16 }));
  const together = await Promise.all(prompts.map((p, i) =>
    i % 2 ? chatStream(p, { max_tokens: 16 }) : chat(p, { max_tokens: 16 })));
  for (let i = 0; i < prompts.length; i++)
    ok(alone[i] === together[i], `request ${i}: ${JSON.stringify(together[i])} together vs ${JSON.stringify(alone[i])} alone`);
  console.log('16 concurrent clients (plain and streamed): each text = its lone run');
}

async function abandon() {
  const r = await chatStream('Write a long story', { max_tokens: 400, ignore_eos: true }, 3);
  ok(r === null, 'abandon: the stream was not aborted');
  console.log('a 400-token stream abandoned after 3 chunks');
}

async function soak(n, c) {
  let next = 0, done = 0, abandoned = 0;
  async function worker(w) {
    while (next < n) {
      const i = next++;
      const p = `soak ${i} from ${w}`;
      if (i % 7 === 3) {
        await chatStream(p, { max_tokens: 6 }, 1);
        abandoned++;
      } else if (i % 2) {
        ok(typeof await chatStream(p, { max_tokens: 4 }) === 'string', 'soak stream');
      } else {
        ok(typeof await complete(p, { max_tokens: 4 }) === 'string', 'soak completion');
      }
      done++;
    }
  }
  await Promise.all(Array.from({ length: c }, (_, w) => worker(w)));
  ok(done === n, `soak: ${done} of ${n}`);
  console.log(`soak: ${n} requests from ${c} clients, ${abandoned} streams abandoned, all others well-formed`);
}

(async () => {
  if (mode === 'basic') await basic();
  else if (mode === 'concurrent') await concurrent();
  else if (mode === 'abandon') await abandon();
  else if (mode === 'soak') await soak(+rest[0], +rest[1]);
  else fail('unknown mode ' + mode);
})().catch((e) => fail(e.stack || String(e)));
