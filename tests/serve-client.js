// serve-client.js: the official `openai` package against `faultline serve`
// (tests/test-serve.sh runs it). usage: node serve-client.js MODE BASE_URL KEY
//   basic   plain and streamed chat and completions; streamed text == plain
//           text at temperature 0; seeded sampling repeats; usage; errors
//           the client raises (400, 401)
//   concurrent  16 clients at once, each text equal to its lone run
//   abandon  a long stream aborted after its first chunks
//   soak N C  N requests from C clients (plain and streamed; every 7th
//           stream abandoned); every finished response well-formed
//   schema  structured outputs (response_format json_schema): plain and
//           streamed answers equal, each JSON of the schema's shape (keys in
//           the schema's order, types, lengths, bounds, enum values), at temperature
//           0 and seeded at 1; a schema keyword not supported is a 400
//   queued N  a stream that waits for the only sequence (-np 1) 2.5 s, longer
//           than the server's --timeout (1 s), behind one of N tokens (then
//           abandoned): kept alive, it ends whole, its text that of the same
//           request alone
//   grow    a call's arguments streamed as they grow: pieces that add up to
//           the plain answer's, the first while the last member is written
//   tools ID  tool calls: a named (and a "required" one-tool) tool_choice
//           gives a well-formed call whose arguments are of its tool's
//           parameters, plain and streamed (ID: the token "}", lifted so
//           that the tiny model's arguments close as soon as they may);
//           "required" among two tools gives a call to one of them; a
//           conversation with calls and results is answered;
//           400 for a tool_choice naming no tool
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
  await expectStatus(400, () => client.completions.create({ model: 'm', prompt: 'x', n: 5 }), 'n: 5 (-np 4)');
  const two = await client.completions.create({ model: 'm', prompt: 'The sea', max_tokens: 8, n: 2,
                                                 temperature: 0.9, seed: 11 });
  const s3 = await complete('The sea', { temperature: 0.9, seed: 12, max_tokens: 8 });
  ok(two.choices.length === 2 && two.choices[1].index === 1 && two.choices[1].text === s3,
     `n: 2: choice 1 ${JSON.stringify(two.choices[1])} vs seed 12 ${JSON.stringify(s3)}`);
  console.log('n: 2: choice 1 = the seed + 1 answer');
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectStatus(401, () => bad.models.list(), 'wrong key');
  console.log('errors: 400 (bad messages, types, n above -np), 401 (wrong key) as APIError');
}

async function queued(n) {
  const ac = new AbortController();
  const long = await client.completions.create({ model: 'm', prompt: 'Go', max_tokens: n,
    ignore_eos: true, stream: true }, { signal: ac.signal });
  const it = long[Symbol.asyncIterator]();
  await it.next(); // it holds the sequence
  const t0 = Date.now();
  const pending = chatStream('Say hello');
  await new Promise((r) => setTimeout(r, 2500)); // past --timeout, nothing to say
  ac.abort(); // the sequence is free for it
  try { while (!(await it.next()).done); } catch (e) { /* aborted */ }
  const streamed = await pending;
  const waited = (Date.now() - t0) / 1000;
  ok(waited > 2.4, `the queued stream waited ${waited} s`);
  const alone = await chatStream('Say hello');
  ok(streamed === alone, `queued stream ${JSON.stringify(streamed)} != alone ${JSON.stringify(alone)}`);
  console.log(`a stream queued ${waited.toFixed(1)} s behind another (--timeout 1) ended whole: ` +
              JSON.stringify(streamed));
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

const weather = { type: 'function', function: { name: 'get_weather', description: 'The weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'] } } };
const clock = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };
const ask = [{ role: 'user', content: 'Weather in Paris?' }];

// A call's arguments are held to its tool's parameters: get_weather's a
// city of up to 10 characters and nothing else, get_time's an empty object.
function checkCall(msg, finish, what, names = ['get_weather']) {
  ok(finish === 'tool_calls', `${what}: finish_reason ${finish}`);
  ok(msg.content === null || msg.content === '', `${what}: content ${JSON.stringify(msg.content)}`);
  const c = msg.tool_calls;
  ok(Array.isArray(c) && c.length === 1 && c[0].type === 'function' && typeof c[0].id === 'string' &&
     names.includes(c[0].function.name), `${what}: tool_calls ${JSON.stringify(c)}`);
  const a = JSON.parse(c[0].function.arguments);
  const want = c[0].function.name === 'get_weather' ? ['city'] : [];
  ok(JSON.stringify(Object.keys(a)) === JSON.stringify(want) &&
     (!a.city || (typeof a.city === 'string' && [...a.city].length <= 10)),
     `${what}: arguments ${c[0].function.arguments}`);
}

async function toolStream(opts) {
  const s = await client.chat.completions.create({ model: 'm', messages: ask, stream: true, ...opts });
  const calls = [], pieces = [];
  let content = '', finish = null;
  for await (const c of s) {
    for (const ch of c.choices) {
      content += ch.delta?.content ?? '';
      for (const d of ch.delta?.tool_calls ?? []) { /* as a client accumulates them */
        const t = calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
        if (d.id) t.id = d.id;
        t.function.name += d.function?.name ?? '';
        t.function.arguments += d.function?.arguments ?? '';
        if (d.function?.arguments) pieces[d.index] = (pieces[d.index] ?? 0) + 1;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { msg: { content: content || null, tool_calls: calls }, finish, pieces };
}

async function grow() {
  // a call's arguments stream as they grow (as llama-server and OpenAI send them), and add up
  // to the plain answer's: its first members go out while its last, 300 characters long, is
  // still being written
  const plan = { type: 'function', function: { name: 'plan', parameters: { type: 'object',
    properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 0, maximum: 9 },
                  note: { type: 'string', minLength: 300, maxLength: 300 } },
    required: ['city', 'days', 'note'], additionalProperties: false } } };
  for (const choice of [{ type: 'function', function: { name: 'plan' } }, 'required']) {
    const grow = { tools: [plan, clock], tool_choice: choice, max_tokens: 400, temperature: 0 };
    const gp = (await client.chat.completions.create({ model: 'm', messages: ask, ...grow })).choices[0];
    const gs = await toolStream(grow);
    const f = (calls) => JSON.stringify(calls.map((c) => c.function));
    ok(gp.finish_reason === 'tool_calls' && gs.finish === 'tool_calls' &&
       f(gs.msg.tool_calls) === f(gp.message.tool_calls),
       `streamed call ${f(gs.msg.tool_calls)} (${gs.finish}) != plain ${f(gp.message.tool_calls)} (${gp.finish_reason})`);
    ok(gp.message.tool_calls[0].function.name !== 'plan' || gs.pieces[0] >= 2,
       `the arguments came in ${gs.pieces[0]} pieces`);
    console.log(`${JSON.stringify(choice).slice(0, 30)}: arguments streamed in ${gs.pieces[0]} pieces = plain: ` +
                f(gp.message.tool_calls).slice(0, 60) + '...');
  }
}

async function tools(brace) {
  const lift = { logit_bias: { [brace]: 100 }, max_tokens: 32, temperature: 0 };
  const named = { tools: [weather, clock], tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...lift };
  const r = await client.chat.completions.create({ model: 'm', messages: ask, ...named });
  checkCall(r.choices[0].message, r.choices[0].finish_reason, 'named, plain');
  const st = await toolStream(named);
  checkCall(st.msg, st.finish, 'named, streamed');
  const one = await client.chat.completions.create({ model: 'm', messages: ask, tools: [weather],
                                                     tool_choice: 'required', ...lift });
  checkCall(one.choices[0].message, one.choices[0].finish_reason, 'required, one tool');
  console.log('tool_choice named / required: tool_calls ' + JSON.stringify(r.choices[0].message.tool_calls));
  const two = await client.chat.completions.create({ model: 'm', messages: ask, tools: [weather, clock],
                                                     tool_choice: 'required', ...lift, max_tokens: 64 });
  checkCall(two.choices[0].message, two.choices[0].finish_reason, 'required among two',
            ['get_weather', 'get_time']);
  console.log('required among two tools: a call to one of them ' + JSON.stringify(two.choices[0].message.tool_calls));
  const history = [...ask,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_9', type: 'function',
      function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_9', content: '22 C' }];
  const h = await client.chat.completions.create({ model: 'm', messages: history, tools: [weather], max_tokens: 6, temperature: 0 });
  ok(['stop', 'length', 'tool_calls'].includes(h.choices[0].finish_reason), 'history: ' + JSON.stringify(h.choices[0]));
  console.log('a conversation with a call and its result: answered (' + h.choices[0].finish_reason + ')');
  await expectStatus(400, () => client.chat.completions.create({ model: 'm', messages: ask, tools: [weather],
    tool_choice: { type: 'function', function: { name: 'nope' } } }), 'tool_choice naming no tool');
  await expectStatus(400, () => client.chat.completions.create({ model: 'm', messages: ask,
    tools: [{ type: 'function', function: { name: 'bad name!' } }] }), 'a tool named "bad name!"');
  console.log('errors: 400 for a tool_choice naming no tool, a bad tool name');
}

const person = { type: 'object', additionalProperties: false,
  properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 120 }, ok: { type: 'boolean' },
    tags: { type: 'array', items: { enum: ['red', 'green'] }, maxItems: 3 },
    note: { anyOf: [{ type: 'string', maxLength: 4 }, { type: 'null' }] } },
  required: ['name', 'age', 'ok', 'tags', 'note'] };

function checkPerson(text, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { fail(`${what}: not JSON: ${JSON.stringify(text)}`); }
  ok(JSON.stringify(Object.keys(v)) === JSON.stringify(person.required), `${what}: keys ${text}`);
  ok(typeof v.name === 'string' && [...v.name].length <= 6, `${what}: name ${text}`);
  ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120 && typeof v.ok === 'boolean', `${what}: age, ok ${text}`);
  ok(Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => t === 'red' || t === 'green'),
     `${what}: tags ${text}`);
  ok(v.note === null || (typeof v.note === 'string' && [...v.note].length <= 4), `${what}: note ${text}`);
}

async function schema() {
  const response_format = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } };
  const opts = { response_format, max_tokens: 490 };
  const plain = await chat('A person as JSON', opts);
  checkPerson(plain, 'temperature 0');
  ok(plain === await chatStream('A person as JSON', opts), 'schema: streamed != plain');
  console.log('json_schema, plain = streamed: ' + plain);
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'A person' }],
      temperature: 1, seed, ...opts });
    ok(r.choices[0].finish_reason === 'stop', `seed ${seed}: finish ${r.choices[0].finish_reason}`);
    checkPerson(r.choices[0].message.content, `seed ${seed}`);
  }
  console.log('json_schema at temperature 1, 4 seeds: each answer of the schema');
  await expectStatus(400, () => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '^a' } } } }),
    'a pattern');
  console.log('errors: 400 for a keyword not supported (pattern)');
}

(async () => {
  if (mode === 'basic') await basic();
  else if (mode === 'tools') await tools(rest[0]);
  else if (mode === 'grow') await grow();
  else if (mode === 'schema') await schema();
  else if (mode === 'concurrent') await concurrent();
  else if (mode === 'queued') await queued(+rest[0]);
  else if (mode === 'abandon') await abandon();
  else if (mode === 'soak') await soak(+rest[0], +rest[1]);
  else fail('unknown mode ' + mode);
})().catch((e) => fail(e.stack || String(e)));
