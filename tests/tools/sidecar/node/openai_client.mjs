// The official openai client against o1-sidecar.
//   node openai_client.mjs BASE_URL EXPECTED_JSON
// EXPECTED_JSON holds the greedy answers libo1client got for the same
// requests ({"model", "completion", "chat", and "refine": the answer of each
// refinement round of the chat request with refine_steps 2, "refine_stop":
// why the loop stopped}). Each check prints one line;
// the exit code is the number of failed checks (0: all passed).
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [baseURL, expectedPath] = process.argv.slice(2);
const want = JSON.parse(readFileSync(expectedPath, 'utf8'));
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
let failed = 0;

function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': ' + detail}`);
  if (!ok) failed++;
}

const chatReq = {
  model: 'default',
  messages: [
    { role: 'system', content: 'You answer.' },
    { role: 'user', content: 'What does the daemon do?' },
  ],
  max_tokens: 40,
  temperature: 0,
};
const complReq = { model: want.model, prompt: 'The daemon', max_tokens: 24, temperature: 0 };

async function chat() {
  const r = await client.chat.completions.create(chatReq);
  const text = r.choices[0].message.content;
  check('chat: greedy equals libo1client', text === want.chat,
        JSON.stringify(text) + ' vs ' + JSON.stringify(want.chat));
  check('chat: usage adds up', r.usage.total_tokens ===
        r.usage.prompt_tokens + r.usage.completion_tokens &&
        r.usage.completion_tokens > 0, JSON.stringify(r.usage));
  const s = await client.chat.completions.create({
    ...chatReq, stream: true, stream_options: { include_usage: true } });
  let joined = '', finish = null, usage = null;
  for await (const chunk of s) {
    if (chunk.choices.length) {
      joined += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check('chat stream: deltas join to the answer', joined === text,
        JSON.stringify(joined));
  check('chat stream: finish_reason', finish === r.choices[0].finish_reason,
        String(finish));
  check('chat stream: usage chunk', usage &&
        usage.completion_tokens === r.usage.completion_tokens,
        JSON.stringify(usage));
}

async function completions() {
  const r = await client.completions.create(complReq);
  const text = r.choices[0].text;
  check('completion: greedy equals libo1client', text === want.completion,
        JSON.stringify(text) + ' vs ' + JSON.stringify(want.completion));
  check('completion: usage', r.usage.completion_tokens > 0 &&
        r.usage.prompt_tokens > 0, JSON.stringify(r.usage));
  const s = await client.completions.create({ ...complReq, stream: true });
  let joined = '';
  for await (const chunk of s) joined += chunk.choices[0]?.text ?? '';
  check('completion stream: chunks join to the answer', joined === text,
        JSON.stringify(joined));
  // a stop sequence from the middle of the answer, first seen at >= 3
  let stop = null;
  for (let k = Math.floor(text.length / 2); k + 4 < text.length; k++) {
    const cand = text.slice(k, k + 4);
    if (text.indexOf(cand) >= 3) { stop = cand; break; }
  }
  check('completion: a stop candidate', stop !== null, text);
  if (stop === null) return;
  const cut = text.slice(0, text.indexOf(stop));
  const st = await client.completions.create({ ...complReq, stop: [stop] });
  check('stop: text ends before the stop sequence',
        st.choices[0].text === cut && st.choices[0].finish_reason === 'stop',
        JSON.stringify(st.choices[0]));
  const ss = await client.chat.completions.create({
    ...chatReq, stop: want.chat.slice(6, 10), stream: true });
  let sj = '';
  for await (const chunk of ss) sj += chunk.choices[0]?.delta?.content ?? '';
  const chatCut = want.chat.slice(0, want.chat.indexOf(want.chat.slice(6, 10)));
  check('stop: streamed chat ends before it', sj === chatCut,
        JSON.stringify(sj) + ' vs ' + JSON.stringify(chatCut));
}

// o1d extensions the client passes through untouched: refine_steps in the
// request, refinement_trace / refinement_stop_reason in the answer (and in
// the last chunk before [DONE]), o1_round on chunks, o1_confidence.
async function refine() {
  const req = { ...chatReq, refine_steps: 2 };
  const r = await client.chat.completions.create(req);
  const tr = r.refinement_trace;
  const last = want.refine[want.refine.length - 1];
  check('refine: refinement_trace equals libo1client\'s rounds',
        Array.isArray(tr) && tr.length === want.refine.length &&
        tr.every((x, i) => x.index === i && x.text === want.refine[i]),
        JSON.stringify(tr) + ' vs ' + JSON.stringify(want.refine));
  check('refine: each round has tokens, confidence, latency, finish',
        Array.isArray(tr) && tr.every((x) => x.tokens.prompt > 0 &&
          x.tokens.generated > 0 && x.tokens.cached <= x.tokens.prompt &&
          x.confidence.mean_logprob <= 0 &&
          x.confidence.min_logprob <= x.confidence.mean_logprob &&
          x.confidence.mean_entropy >= 0 && x.latency_ms > 0 &&
          ['stop', 'length'].includes(x.finish_reason)),
        JSON.stringify(tr));
  check('refine: stop reason', r.refinement_stop_reason === want.refine_stop,
        String(r.refinement_stop_reason));
  check('refine: the answer is the last round\'s',
        r.choices[0].message.content === last,
        JSON.stringify(r.choices[0].message.content));
  check('refine: o1_confidence on the choice',
        r.choices[0].o1_confidence?.mean_logprob ===
        tr[tr.length - 1].confidence.mean_logprob,
        JSON.stringify(r.choices[0].o1_confidence));
  const s = await client.chat.completions.create({
    ...req, stream: true, stream_options: { include_usage: true } });
  const rounds = [];
  let lastChunk = null, ordered = true, prev = 0;
  for await (const chunk of s) {
    if (chunk.choices.length) {
      const k = chunk.o1_round;
      ordered = ordered && Number.isInteger(k) && k >= prev;
      prev = k;
      rounds[k] = (rounds[k] ?? '') + (chunk.choices[0].delta.content ?? '');
    }
    lastChunk = chunk;
  }
  check('refine stream: o1_round on every chunk, in order', ordered,
        JSON.stringify(rounds));
  check('refine stream: each round\'s deltas join to its answer',
        JSON.stringify(rounds) === JSON.stringify(want.refine),
        JSON.stringify(rounds));
  check('refine stream: trace and usage in the last chunk',
        lastChunk?.refinement_trace?.length === want.refine.length &&
        lastChunk.refinement_stop_reason === want.refine_stop &&
        lastChunk.usage?.completion_tokens === r.usage.completion_tokens,
        JSON.stringify(lastChunk));
}

async function errors() {
  const models = await client.models.list();
  check('models: lists the served model',
        models.data.some((m) => m.id === want.model), JSON.stringify(models.data));
  try {
    await client.chat.completions.create({ ...chatReq, model: 'gpt-4o' });
    check('unknown model: 404', false, 'no error');
  } catch (e) {
    check('unknown model: 404', e instanceof OpenAI.NotFoundError &&
          e.error?.code === 'model_not_found', String(e));
  }
  try {
    await client.chat.completions.create({ ...chatReq, max_tokens: -1 });
    check('negative max_tokens: 400', false, 'no error');
  } catch (e) {
    check('negative max_tokens: 400', e instanceof OpenAI.BadRequestError &&
          e.error?.param === 'max_tokens', String(e));
  }
  try {
    await client.completions.create({ ...complReq, refine_steps: 1 });
    check('refine_steps on completions: 400', false, 'no error');
  } catch (e) {
    check('refine_steps on completions: 400',
          e instanceof OpenAI.BadRequestError &&
          e.error?.param === 'refine_steps', String(e));
  }
}

// A 240 KB prompt with the client's default retries: one 400 naming the
// parameter, and no retry (a 429 or 5xx would be retried twice).
async function mistakes() {
  let calls = 0;
  const retrying = new OpenAI({
    baseURL, apiKey: 'unused',
    fetch: (url, init) => { calls++; return fetch(url, init); },
  });
  try {
    await retrying.chat.completions.create({
      ...chatReq, messages: [{ role: 'user', content: 'a'.repeat(240 * 1024) }] });
    check('240 KB prompt: 400', false, 'no error');
  } catch (e) {
    check('240 KB prompt: 400 context_length_exceeded on messages',
          e instanceof OpenAI.BadRequestError &&
          e.error?.code === 'context_length_exceeded' &&
          e.error?.param === 'messages', String(e));
  }
  check('240 KB prompt: sent once, not retried', calls === 1, String(calls));
}

// response_format (structured output): json_schema answers, strict, parse
// and fit the schema, whole and streamed; a schema keyword outside o1d's
// subset is a 400 naming it on response_format.
async function structured() {
  const schema = {
    type: 'object',
    properties: {
      answer: { enum: ['yes', 'no', 'maybe'] },
      n: { type: 'integer', minimum: 0, maximum: 99 },
      why: { type: 'string', maxLength: 20 },
    },
    required: ['answer', 'n', 'why'],
    additionalProperties: false,
  };
  const rf = { type: 'json_schema', json_schema: { name: 'verdict', strict: true, schema } };
  const fits = (t) => {
    try {
      const o = JSON.parse(t);
      return Object.keys(o).join() === 'answer,n,why' &&
        ['yes', 'no', 'maybe'].includes(o.answer) && Number.isInteger(o.n) &&
        o.n >= 0 && o.n <= 99 && typeof o.why === 'string' && [...o.why].length <= 20;
    } catch {
      return false;
    }
  };
  const req = { ...chatReq, temperature: 0.9, max_tokens: 200, response_format: rf };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ ...req, seed });
    const t = r.choices[0].message.content;
    check(`json_schema seed ${seed}: parses and fits the schema`,
          fits(t) && r.choices[0].finish_reason === 'stop', JSON.stringify(t));
  }
  const s = await client.chat.completions.create({ ...req, seed: 4, stream: true });
  let joined = '';
  for await (const chunk of s) joined += chunk.choices[0]?.delta?.content ?? '';
  check('json_schema stream: the deltas join to a fitting document', fits(joined),
        JSON.stringify(joined));
  try {
    await client.chat.completions.create({
      ...chatReq, response_format: { type: 'json_schema',
        json_schema: { name: 'x', schema: { type: 'object', propertyNames: {} } } } });
    check('unsupported schema keyword: 400', false, 'no error');
  } catch (e) {
    check('unsupported schema keyword: 400 naming it on response_format',
          e instanceof OpenAI.BadRequestError && e.error?.param === 'response_format' &&
          /propertyNames/.test(e.error?.message ?? ''), String(e));
  }
}

// Tool calling (o1d serves a Hermes-style template): tool_choice
// "required" forces a call whose arguments fit the schema; the SDK's
// stream helper assembles the same call from the deltas; runTools with a
// named function calls it and the conversation with the call and its
// result goes back to the model; top_logprobs carry o1d's token text.
async function tools() {
  const parameters = {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Oslo'] }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'], additionalProperties: false,
  };
  const fns = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters } },
               { type: 'function', function: { name: 'get_time', parameters: {
                 type: 'object', properties: { zone: { enum: ['utc', 'cet'] } },
                 required: ['zone'], additionalProperties: false } } }];
  const fits = (c) => {
    try {
      const a = JSON.parse(c.function.arguments);
      return c.type === 'function' && c.id.length > 0 && (c.function.name === 'get_weather'
        ? ['Paris', 'Oslo'].includes(a.city) && ['c', 'f'].includes(a.unit) && Object.keys(a).length === 2
        : c.function.name === 'get_time' && ['utc', 'cet'].includes(a.zone));
    } catch {
      return false;
    }
  };
  const req = { ...chatReq, max_tokens: 300, tools: fns, tool_choice: 'required' };
  const r = await client.chat.completions.create(req);
  const m = r.choices[0].message;
  check('tools required: a call that fits its schema', r.choices[0].finish_reason === 'tool_calls' &&
        m.content === null && m.tool_calls?.length === 1 && fits(m.tool_calls[0]), JSON.stringify(r.choices[0]));
  const s = client.beta.chat.completions.stream(req);
  const f = await s.finalChatCompletion();
  const fm = f.choices[0].message;
  check('tools stream: the SDK assembles the same call', f.choices[0].finish_reason === 'tool_calls' &&
        fm.tool_calls?.length === 1 && fm.tool_calls[0].function.name === m.tool_calls?.[0]?.function.name &&
        fm.tool_calls[0].function.arguments === m.tool_calls?.[0]?.function.arguments, JSON.stringify(fm));
  let got = null;
  const runner = client.beta.chat.completions.runTools({
    ...chatReq, max_tokens: 300,
    tools: [{ type: 'function', function: { name: 'get_weather', parameters, parse: JSON.parse,
                                             function: (a) => { got = a; return { temp: 18 }; } } }],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  await runner.done();
  check('runTools: the named function ran with fitting arguments',
        got && ['Paris', 'Oslo'].includes(got.city) && ['c', 'f'].includes(got.unit), JSON.stringify(got));
  const msgs = runner.messages;
  check('runTools: the call and its result are in the conversation',
        msgs.some((x) => x.role === 'assistant' && x.tool_calls?.length === 1) &&
        msgs.some((x) => x.role === 'tool' && x.content === '{"temp":18}'), JSON.stringify(msgs));
  const back = await client.chat.completions.create({ ...chatReq, max_tokens: 8, tools: fns, messages: msgs });
  check('tools: the call and result go back to the model', back.usage.prompt_tokens > r.usage.prompt_tokens,
        JSON.stringify(back.usage) + ' vs ' + JSON.stringify(r.usage));
  const lp = await client.chat.completions.create({ ...chatReq, max_tokens: 8, logprobs: true, top_logprobs: 3 });
  const tops = lp.choices[0].logprobs.content.flatMap((c) => c.top_logprobs);
  check('top_logprobs: o1d names every alternative, with its bytes', tops.length === 3 * lp.usage.completion_tokens &&
        tops.every((t) => !/^<\d+>$/.test(t.token) && Array.isArray(t.bytes) && t.bytes.length > 0),
        JSON.stringify(tops.slice(0, 6)));
  try {
    await client.chat.completions.create({ ...chatReq, tools: fns, tool_choice: { type: 'function', function: { name: 'nope' } } });
    check('tool_choice naming no tool: 400', false, 'no error');
  } catch (e) {
    check('tool_choice naming no tool: 400 on tool_choice', e instanceof OpenAI.BadRequestError &&
          e.error?.param === 'tool_choice', String(e));
  }
}

try {
  await chat();
  await completions();
  await refine();
  await errors();
  await mistakes();
  await structured();
  await tools();
} catch (e) {
  check('no exception', false, e.stack ?? String(e));
}
process.exit(failed);
