// serve-aisdk.js: the Vercel AI SDK (`ai` with `@ai-sdk/openai` and
// `@ai-sdk/anthropic`, pinned in tests/test-serve.sh) against `faultline
// serve`, through its three chat APIs: OpenAI's Responses API (the openai
// provider's default), chat completions and Anthropic's messages.
// usage: node serve-aisdk.mjs ROOT_URL KEY
//   The same request through each API gives the same text and token counts
//   at temperature 0, plain (generateText) and streamed (streamText); a
//   forced tool's call is the same plain and streamed, its 300-character
//   argument streamed in several tool-input-delta parts, and no stream
//   carries an error part. Prints one line per check; exits 1 on the first
//   failure.
'use strict';
const { generateText, jsonSchema, streamText, tool } = require('ai');
const { createAnthropic } = require('@ai-sdk/anthropic');
const { createOpenAI } = require('@ai-sdk/openai');

const [root, apiKey] = process.argv.slice(2);
const fail = (msg) => { console.log('FAIL: ' + msg); process.exit(1); };
const ok = (cond, msg) => { if (!cond) fail(msg); };

const openai = createOpenAI({ baseURL: root + '/v1', apiKey });
const models = {
  responses: openai.responses('m'),
  chat: openai.chat('m'),
  messages: createAnthropic({ baseURL: root + '/v1', apiKey })('m'),
};
const plan = tool({
  description: 'Plan a trip',
  inputSchema: jsonSchema({ type: 'object', additionalProperties: false, required: ['city', 'days', 'note'],
    properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 0, maximum: 9 },
                  note: { type: 'string', minLength: 300, maxLength: 300 } } }),
});

async function streamed(model, req) {
  const s = streamText({ model, ...req });
  let text = '', deltas = 0;
  for await (const p of s.fullStream) {
    if (p.type === 'error') fail(`a stream's error part: ${p.error}`);
    if (p.type === 'text-delta') text += p.text;
    if (p.type === 'tool-input-delta') deltas++;
  }
  return { text, deltas, calls: await s.toolCalls, usage: await s.usage };
}

const story = { prompt: 'Write a story.', maxOutputTokens: 16, temperature: 0 };
const forced = { prompt: 'Plan a trip.', tools: { plan }, toolChoice: { type: 'tool', toolName: 'plan' },
                 maxOutputTokens: 400, temperature: 0 };
(async () => {
  const seen = {};
  for (const [api, model] of Object.entries(models)) {
    const g = await generateText({ model, ...story });
    const s = await streamed(model, story);
    ok(g.text.length > 0 && s.text === g.text && g.usage.outputTokens === 16 &&
       s.usage.inputTokens === g.usage.inputTokens,
       `${api}: streamed ${JSON.stringify(s.text)} vs plain ${JSON.stringify(g.text)}, usage ` +
       `${JSON.stringify(g.usage)}`);
    const gc = await generateText({ model, ...forced });
    const sc = await streamed(model, forced);
    const input = (calls) => JSON.stringify(calls.map((c) => [c.toolName, c.input]));
    ok(gc.toolCalls.length === 1 && gc.toolCalls[0].input.note.length === 300 &&
       input(sc.calls) === input(gc.toolCalls) && sc.deltas >= 2,
       `${api}: streamed call ${input(sc.calls)} in ${sc.deltas} deltas vs plain ${input(gc.toolCalls)}`);
    seen[api] = { text: g.text, tokens: [g.usage.inputTokens, g.usage.outputTokens], call: input(gc.toolCalls) };
    console.log(`${api}: text and usage the same plain and streamed; a forced call the same, its ` +
                `arguments in ${sc.deltas} deltas`);
  }
  const [first, ...rest] = Object.values(seen);
  ok(rest.every((v) => JSON.stringify(v) === JSON.stringify(first)),
     `the three APIs differ: ${JSON.stringify(seen)}`);
  console.log(`the three APIs: the same text, token counts ${JSON.stringify(first.tokens)} and call`);
  console.log('ai sdk: all checks passed');
})().catch((e) => fail(e.stack || String(e)));
