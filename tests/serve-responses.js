// serve-responses.js: the official `openai` package's Responses API
// (client.responses) against `faultline serve`'s /v1/responses
// (tests/test-serve.sh runs it). usage: node serve-responses.js BASE_URL KEY
//   responses.create: output_text, status (incomplete at max_output_tokens),
//   usage; responses.stream (the SDK's snapshot of the events) gives the
//   same text and usage at temperature 0; a forced function call
//   (tool_choice function) gives a function_call item whose arguments are
//   of the tool's schema, plain and streamed, its arguments streamed as they
//   grow (function_call_arguments.delta); a conversation of
//   function_call and function_call_output items counts the input tokens of
//   the chat request it stands for (chat.completions' prompt_tokens); a
//   json_schema text.format gives JSON of the schema; 400s for
//   previous_response_id and images.
// Prints one line per check; exits 1 on the first failure.
'use strict';
const OpenAI = require('openai');

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const fail = (msg) => { console.log('FAIL: ' + msg); process.exit(1); };
const ok = (cond, msg) => { if (!cond) fail(msg); };

async function plainAndStreamed() {
  const req = { model: 'm', instructions: 'You tell stories.', input: 'Write a story.',
                max_output_tokens: 16, temperature: 0 };
  const r = await client.responses.create(req);
  ok(r.object === 'response' && r.id.startsWith('resp_') && r.created_at > 0 && r.model,
     'response fields ' + JSON.stringify(r));
  ok(r.output.length === 1 && r.output[0].type === 'message' && r.output_text.length > 0,
     'one message ' + JSON.stringify(r.output));
  ok(r.status === 'incomplete' && r.incomplete_details.reason === 'max_output_tokens' &&
     r.usage.output_tokens === 16 && r.usage.input_tokens > 0 &&
     r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens,
     'incomplete at 16 tokens, usage ' + JSON.stringify(r.usage));
  const s = client.responses.stream(req);
  let deltas = '';
  s.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const f = await s.finalResponse();
  const snap = f.output.filter((o) => o.type === 'message').flatMap((o) => o.content)
    .map((p) => p.text).join('');
  ok(deltas === r.output_text && snap === r.output_text,
     `streamed ${JSON.stringify(deltas)} / ${JSON.stringify(snap)} vs ${JSON.stringify(r.output_text)}`);
  console.log(`responses.create and responses.stream: the same text (${r.usage.output_tokens} tokens, ` +
              `${r.status})`);
}

const digit = { type: 'function', name: 'pick', description: 'Pick a digit.',
  parameters: { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 9 } },
                required: ['n'], additionalProperties: false } };

function checkCall(r, what) {
  const calls = r.output.filter((o) => o.type === 'function_call');
  ok(calls.length === 1 && calls[0].name === 'pick' && calls[0].call_id && calls[0].id.startsWith('fc_'),
     `${what}: ${JSON.stringify(r.output)}`);
  ok(r.output.length === 1, `${what}: the call's text is no message too: ${JSON.stringify(r.output)}`);
  const a = JSON.parse(calls[0].arguments);
  ok(Number.isInteger(a.n) && a.n >= 0 && a.n <= 9 && Object.keys(a).length === 1,
     `${what}: arguments ${calls[0].arguments}`);
  return calls[0];
}

async function tools() {
  const req = { model: 'm', input: 'Pick one.', tools: [digit], max_output_tokens: 32, temperature: 0,
                tool_choice: { type: 'function', name: 'pick' } };
  const call = checkCall(await client.responses.create(req), 'forced call, plain');
  const f = await client.responses.stream(req).finalResponse();
  const scall = checkCall(f, 'forced call, streamed');
  ok(scall.arguments === call.arguments, `streamed ${scall.arguments} vs ${call.arguments}`);
  console.log('tool_choice function: a function_call item of the schema, plain and streamed ' + call.arguments);
  const input = [{ role: 'user', content: 'Pick one.' },
    { type: 'function_call', call_id: 'call_7', name: 'pick', arguments: '{"n":7}' },
    { type: 'function_call_output', call_id: 'call_7', output: '7' },
    { role: 'user', content: [{ type: 'input_text', text: 'Again.' }] }];
  const r = await client.responses.create({ model: 'm', input, tools: [digit], max_output_tokens: 1, temperature: 0 });
  const c = await client.chat.completions.create({ model: 'm', max_tokens: 1, temperature: 0,
    tools: [{ type: 'function', function: { name: 'pick', description: 'Pick a digit.', parameters: digit.parameters } }],
    messages: [{ role: 'user', content: 'Pick one.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_7', type: 'function',
        function: { name: 'pick', arguments: '{"n":7}' } }] },
      { role: 'tool', tool_call_id: 'call_7', content: '7' }, { role: 'user', content: 'Again.' }] });
  ok(r.usage.input_tokens === c.usage.prompt_tokens && r.usage.input_tokens > 20,
     `input tokens ${r.usage.input_tokens}, the chat request's ${c.usage.prompt_tokens}`);
  console.log(`function_call and function_call_output items: ${r.usage.input_tokens} input tokens = the chat request's`);
}

// A call's arguments stream as they grow (as llama-server and OpenAI send them): its
// function_call_arguments.delta events, at the call's output_index, add up to the plain
// answer's arguments, its first members out while its last, 300 characters long, is still
// being written; every item the events add and close is the response object's item at
// that index (the SDK throws on a delta for an index it has no item at).
async function grow() {
  const plan = { type: 'function', name: 'plan', parameters: { type: 'object',
    properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 0, maximum: 9 },
                  note: { type: 'string', minLength: 300, maxLength: 300 } },
    required: ['city', 'days', 'note'], additionalProperties: false } };
  const shape = (items) => JSON.stringify(items.map((o) => [o.type, o.name, o.arguments,
    o.content && o.content.map((c) => c.text)]));
  for (const choice of [{ type: 'function', name: 'plan' }, 'required']) {
    const req = { model: 'm', input: 'Plan a trip.', tools: [plan, digit], tool_choice: choice,
                  max_output_tokens: 400, temperature: 0 };
    const p = await client.responses.create(req);
    const s = client.responses.stream(req);
    const added = [], closed = [], args = [];
    let pieces = 0;
    s.on('response.output_item.added', (e) => { added[e.output_index] = e.item; });
    s.on('response.function_call_arguments.delta', (e) => {
      ok(added[e.output_index] && added[e.output_index].id === e.item_id && !closed[e.output_index],
         `a delta for ${e.item_id} at ${e.output_index}: ${JSON.stringify(added)}`);
      args[e.output_index] = (args[e.output_index] ?? '') + e.delta;
      pieces++;
    });
    s.on('response.function_call_arguments.done', (e) => {
      ok(e.arguments === args[e.output_index], `done ${e.arguments} after deltas ${args[e.output_index]}`);
    });
    s.on('response.output_item.done', (e) => { closed[e.output_index] = e.item; });
    const f = await s.finalResponse();
    ok(p.status === 'completed' && f.status === 'completed' && shape(f.output) === shape(p.output) &&
       shape(closed) === shape(f.output) &&
       JSON.stringify(added.map((o) => o.id)) === JSON.stringify(f.output.map((o) => o.id)),
       `streamed ${shape(f.output)} (closed ${shape(closed)}) != plain ${shape(p.output)}`);
    const call = f.output.find((o) => o.type === 'function_call');
    ok(call && (call.name !== 'plan' || pieces >= 2), `the arguments came in ${pieces} pieces`);
    console.log(`${JSON.stringify(choice).slice(0, 30)}: arguments streamed in ${pieces} pieces = plain: ` +
                shape(p.output).slice(0, 60) + '...');
  }
}

async function format() {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'],
                   additionalProperties: false };
  const r = await client.responses.create({ model: 'm', input: 'JSON please.', max_output_tokens: 32,
    temperature: 0, text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } } });
  const v = JSON.parse(r.output_text);
  ok(typeof v.ok === 'boolean' && Object.keys(v).length === 1 && r.status === 'completed',
     'json_schema: ' + JSON.stringify(r));
  console.log('text.format json_schema: ' + r.output_text);
}

async function errors() {
  for (const [body, what] of [
    [{ model: 'm', input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] },
     'input[0].content[0]'],
    [{ model: 'm', input: [] }, 'input'],
    [{ model: 'm', input: 'x', temperature: 'hot' }, 'temperature']]) {
    try {
      await client.responses.create(body);
      fail('accepted: ' + JSON.stringify(body));
    } catch (e) {
      ok(e instanceof OpenAI.BadRequestError && e.status === 400 && e.message.includes(what),
         `400 naming ${what}: ${e}`);
    }
  }
  console.log('errors: 400 BadRequestError for previous_response_id, an image, no input, a wrong type');
}

(async () => {
  await plainAndStreamed();
  await tools();
  await grow();
  await format();
  await errors();
  console.log('responses client: all checks passed');
})().catch((e) => fail(e.stack || String(e)));
