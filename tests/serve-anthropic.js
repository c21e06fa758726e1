// serve-anthropic.js: the official `@anthropic-ai/sdk` package against
// `faultline serve`'s /v1/messages (tests/test-serve.sh runs it).
// usage: node serve-anthropic.js ROOT_URL KEY
//   messages.create: a text block, stop_reason, usage; streamed (the SDK's
//   MessageStream) text == plain text at temperature 0; stop_sequences end
//   with stop_reason stop_sequence; a forced tool (tool_choice tool) gives a
//   tool_use block whose input is of the tool's schema, plain and streamed
//   (input_json_delta), stop_reason tool_use; a conversation with tool_use
//   and tool_result blocks counts the tokens of the OpenAI request it stands
//   for (count_tokens against /apply-template + /tokenize); Claude Code's
//   billing header (its changing checksum does not stop the prompt cache)
//   and system messages among the turns; the SDK's
//   errors: 401 (AuthenticationError), 400 (BadRequestError) with
//   Anthropic's error shape.
// Prints one line per check; exits 1 on the first failure.
'use strict';
const Anthropic = require('@anthropic-ai/sdk');

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const fail = (msg) => { console.log('FAIL: ' + msg); process.exit(1); };
const ok = (cond, msg) => { if (!cond) fail(msg); };
const ask = [{ role: 'user', content: 'Write a story.' }];

async function post(path, body) {
  const r = await fetch(baseURL + path, { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', 'x-api-key': apiKey } });
  return r.json();
}

function text(m) {
  return m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

async function plainAndStreamed() {
  const req = { model: 'm', max_tokens: 16, temperature: 0, system: 'You tell stories.', messages: ask };
  const m = await client.messages.create(req);
  ok(m.type === 'message' && m.role === 'assistant' && m.id.startsWith('msg_') && m.model,
     'message fields ' + JSON.stringify(m));
  ok(m.content.length === 1 && m.content[0].type === 'text' && m.content[0].text.length > 0,
     'one text block ' + JSON.stringify(m.content));
  ok(m.stop_reason === 'max_tokens' || m.stop_reason === 'end_turn', 'stop_reason ' + m.stop_reason);
  ok(m.usage.input_tokens > 0 && m.usage.output_tokens > 0 && m.usage.output_tokens <= 16,
     'usage ' + JSON.stringify(m.usage));
  const s = client.messages.stream(req);
  let deltas = '';
  s.on('text', (t) => { deltas += t; });
  const f = await s.finalMessage();
  ok(deltas === text(m) && text(f) === text(m) && f.stop_reason === m.stop_reason &&
     f.usage.output_tokens === m.usage.output_tokens,
     `streamed: ${JSON.stringify(deltas)} vs ${JSON.stringify(text(m))}`);
  console.log(`messages.create and messages.stream: the same text (${m.usage.output_tokens} tokens, ` +
              `${m.stop_reason})`);
  const long = await client.messages.create({ ...req, max_tokens: 24 });
  const t = text(long);
  const stop = t.slice(6, 9);
  ok(stop.length === 3, 'an answer long enough for a stop sequence: ' + JSON.stringify(t));
  const cut = await client.messages.create({ ...req, max_tokens: 24, stop_sequences: [stop] });
  ok(cut.stop_reason === 'stop_sequence' && cut.stop_sequence === stop &&
     text(cut) === t.slice(0, t.indexOf(stop)),
     `stop_sequences: ${JSON.stringify(cut)} (stop ${JSON.stringify(stop)} in ${JSON.stringify(t)})`);
  console.log('stop_sequences: stop_reason stop_sequence, the text before it');
}

const digit = { name: 'pick', description: 'Pick a digit.',
  input_schema: { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 9 } },
                  required: ['n'], additionalProperties: false } };

function checkToolUse(m, what) {
  const uses = m.content.filter((b) => b.type === 'tool_use');
  ok(m.stop_reason === 'tool_use' && uses.length === 1 && uses[0].name === 'pick' &&
     uses[0].id.startsWith('toolu_') && Number.isInteger(uses[0].input.n) &&
     uses[0].input.n >= 0 && uses[0].input.n <= 9 && Object.keys(uses[0].input).length === 1,
     `${what}: ${JSON.stringify(m)}`);
  ok(m.content.length === 1, `${what}: the call's text is no text block too: ${JSON.stringify(m.content)}`);
  return uses[0];
}

async function tools() {
  const req = { model: 'm', max_tokens: 32, temperature: 0, messages: ask, tools: [digit],
                tool_choice: { type: 'tool', name: 'pick' } };
  const m = await client.messages.create(req);
  const use = checkToolUse(m, 'forced tool, plain');
  const s = client.messages.stream(req);
  let partial = '';
  s.on('inputJson', (delta) => { partial += delta; });
  const f = await s.finalMessage();
  const suse = checkToolUse(f, 'forced tool, streamed');
  ok(JSON.stringify(suse.input) === JSON.stringify(use.input) && JSON.parse(partial).n === use.input.n,
     `streamed input ${partial} vs ${JSON.stringify(use.input)}`);
  console.log('tool_choice tool: a tool_use block of the schema, plain and streamed ' + JSON.stringify(use.input));
  // a longer input streams as it grows: input_json_delta pieces that add up to it, its first
  // members while its last, 300 characters long, is still being written
  const plan = { name: 'plan', input_schema: { type: 'object', additionalProperties: false,
    properties: { days: { type: 'integer', minimum: 0, maximum: 9 }, warm: { type: 'boolean' },
                  note: { type: 'string', minLength: 300, maxLength: 300 } }, required: ['days', 'warm', 'note'] } };
  const preq = { ...req, max_tokens: 400, tools: [plan], tool_choice: { type: 'tool', name: 'plan' } };
  const pm = (await client.messages.create(preq)).content.find((b) => b.type === 'tool_use');
  const ps = client.messages.stream(preq);
  let pieces = 0;
  ps.on('inputJson', () => { pieces++; });
  const pf = (await ps.finalMessage()).content.find((b) => b.type === 'tool_use');
  ok(pm && pf && JSON.stringify(pf.input) === JSON.stringify(pm.input) && pieces >= 2,
     `streamed input ${JSON.stringify(pf && pf.input)} in ${pieces} pieces vs ${JSON.stringify(pm && pm.input)}`);
  console.log(`a tool_use input streamed in ${pieces} input_json_delta pieces = plain: ` +
              JSON.stringify(pm.input).slice(0, 60) + '...');
  // the conversation goes on: the call and its result, as OpenAI's messages
  const history = [...ask,
    { role: 'assistant', content: [{ type: 'text', text: 'Let me pick.' },
      { type: 'tool_use', id: 'toolu_1', name: 'pick', input: { n: 3 } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '3' }] },
      { type: 'text', text: 'Go on.' }] }];
  const h = await client.messages.create({ model: 'm', max_tokens: 6, temperature: 0, tools: [digit],
                                           messages: history });
  ok(['end_turn', 'max_tokens', 'tool_use'].includes(h.stop_reason), 'history: ' + JSON.stringify(h));
  const counted = await client.messages.countTokens({ model: 'm', tools: [digit], messages: history });
  const oai = { messages: [{ role: 'user', content: 'Write a story.' },
    { role: 'assistant', content: 'Let me pick.', tool_calls: [{ id: 'toolu_1', type: 'function',
      function: { name: 'pick', arguments: '{"n":3}' } }] },
    { role: 'tool', tool_call_id: 'toolu_1', content: '3' }, { role: 'user', content: 'Go on.' }],
    tools: [{ type: 'function', function: { name: 'pick', description: 'Pick a digit.',
                                             parameters: digit.input_schema } }] };
  const prompt = (await post('/apply-template', oai)).prompt;
  const want = (await post('/tokenize', { content: prompt, add_special: true, parse_special: true })).tokens.length;
  ok(counted.input_tokens === want && want > 20,
     `count_tokens ${JSON.stringify(counted)}, the OpenAI request's prompt ${want}`);
  console.log(`tool_use and tool_result blocks: answered; count_tokens ${want} = the OpenAI request's prompt`);
}

async function errors() {
  const bad = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.messages.create({ model: 'm', max_tokens: 4, messages: ask });
    fail('a wrong key was accepted');
  } catch (e) {
    ok(e instanceof Anthropic.AuthenticationError && e.status === 401 &&
       e.error?.type === 'error' && e.error?.error?.type === 'authentication_error', '401: ' + e);
  }
  for (const [body, what] of [
    [{ model: 'm', max_tokens: 4, messages: [] }, 'messages'],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'tool', content: 'x' }] }, 'messages[0]'],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image',
       source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }, 'messages[0].content[0]'],
    [{ model: 'm', max_tokens: 4, messages: ask, tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
     'tools[0]'],
    [{ model: 'm', max_tokens: 4, messages: ask, temperature: 'hot' }, 'temperature']]) {
    try {
      await client.messages.create(body);
      fail(`accepted: ${JSON.stringify(body)}`);
    } catch (e) {
      ok(e instanceof Anthropic.BadRequestError && e.status === 400 &&
         e.error?.error?.type === 'invalid_request_error' && e.error.error.message.startsWith(what),
         `400 naming ${what}: ${e} ${JSON.stringify(e.error)}`);
    }
  }
  console.log('errors: 401 AuthenticationError, 400 BadRequestError naming the field (Anthropic\'s shape)');
}

// Claude Code's requests: its first system block is a billing header whose cch= checksum changes
// from request to request (written fffff, as llama-server writes it, so that the prompt cache
// still reads the long system prompt after it), and it sends system messages among the turns
async function claudeCode() {
  const system = (cch) => [
    { type: 'text', text: `x-anthropic-billing-header: cc_version=2.1.197; cch=${cch}; cc_entrypoint=cli;` },
    { type: 'text', text: 'You are a careful agent. '.repeat(60), cache_control: { type: 'ephemeral' } }];
  const req = (cch) => ({ model: 'm', max_tokens: 2, temperature: 0, system: system(cch),
                          messages: [ask[0], { role: 'system', content: 'Stay brief.' }] });
  const a = await client.messages.create(req('a1b2c'));
  const b = await client.messages.create(req('9f8e7'));
  const all = (m) => m.usage.input_tokens + m.usage.cache_read_input_tokens;
  ok(all(a) === all(b) && all(a) > 300 && b.usage.cache_read_input_tokens > 0 && text(a) === text(b),
     `cch a1b2c then 9f8e7: ${JSON.stringify(a.usage)} / ${JSON.stringify(b.usage)}`);
  console.log(`Claude Code's billing header and system messages: the second request read ` +
              `${b.usage.cache_read_input_tokens} of ${all(b)} prompt tokens from the cache`);
}

async function models() {
  const page = await client.models.list();
  const all = page.data;
  ok(all.length === 1 && all[0].type === 'model' && all[0].id && all[0].display_name === all[0].id &&
     !Number.isNaN(Date.parse(all[0].created_at)), 'models.list ' + JSON.stringify(all));
  console.log('models.list: ' + all[0].id + ', created ' + all[0].created_at);
}

(async () => {
  await models();
  await plainAndStreamed();
  await tools();
  await claudeCode();
  await errors();
  console.log('anthropic client: all checks passed');
})().catch((e) => fail(e.stack || String(e)));
