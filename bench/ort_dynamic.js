// ONNX Runtime (onnxruntime-node) side of bench/dynamic.py: one session (all
// graph optimizations, N intra-op threads) driven through a sequence of input
// shapes, or through greedy decoding with a key/value cache. Prints one JSON
// line.
// Usage: node ort_dynamic.js SPEC.json
//   {"kind": "shapes", "model", "threads", "warmup", "runs", "input", "shapes": [[dims]...]}
//     per shape: first_ms (the first run at that shape in this session), then
//     `warmup` runs, then median_ms / min_ms of `runs` runs. The input's values
//     are (i % 7) * 0.5, as bench/dynamic.py feeds cge.
//   {"kind": "decode", "model", "threads", "prompt": [[ids]], "steps", "runs", "generations",
//    "inputs": [input_ids, past names...], "past_shape": [heads, head_dim]}
//     per generation: prefill with an empty past (past_len 0), its argmax the
//     first token, then `steps` steps, each feeding the last token and the
//     presents back as the past (steps + 1 tokens; each timing includes the
//     argmax); then the last step `runs` times more at its shape (seen_step_ms).
//   {"kind": "static_decode", "model", "threads", "prompt", "steps", "runs", "generations",
//    "ids", "pos", "cache": [[input name, output name, [dims]]...]}
//     a static-cache decoder: per generation, zeroed caches, the prompt in one
//     run at pos 0 (prefill), then `steps` runs of one token at pos n, n+1, ...,
//     each feeding the present caches back; then the last step `runs` times more.
const fs = require('fs');
const { ort, createSession, version } = require('./ort_common');

const now = () => process.hrtime.bigint();
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const firstLine = (e) => String((e && e.message) || e).split('\n')[0];

function pattern(dims) {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = (i % 7) * 0.5;
  return new ort.Tensor('float32', data, dims);
}

async function shapes(session, spec) {
  const rows = [];
  for (const dims of spec.shapes) {
    const feeds = { [spec.input]: pattern(dims) };
    try {
      let t0 = now();
      await session.run(feeds);
      const first = ms(t0);
      for (let i = 0; i < spec.warmup; i++) await session.run(feeds);
      const times = [];
      for (let i = 0; i < spec.runs; i++) {
        t0 = now();
        await session.run(feeds);
        times.push(ms(t0));
      }
      times.sort((a, b) => a - b);
      rows.push({ shape: dims, first_ms: first, median_ms: times[Math.floor(times.length / 2)],
                  min_ms: times[0] });
    } catch (e) {
      rows.push({ shape: dims, error: firstLine(e) });
    }
  }
  return { rows };
}

function argmaxLast(logits) {
  const [, seq, vocab] = logits.dims;
  const d = logits.data;
  let best = 0;
  const off = (seq - 1) * vocab;
  for (let j = 1; j < vocab; j++) if (d[off + j] > d[off + best]) best = j;
  return best;
}

function int64(values, dims) {
  return new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), dims);
}

// Greedy decoding, spec.generations times: the prompt's feeds (first()),
// then spec.steps steps, each fed by step(token, s, previous outputs), then
// the last step again at its (now seen) shape.
async function greedy(session, spec, first, step) {
  const gens = [];
  for (let g = 0; g < spec.generations; g++) {
    try {
      let t0 = now();
      let out = await session.run(first());
      const tokens = [argmaxLast(out.logits)];
      const prefill = ms(t0);
      const times = [];
      let f = null;
      for (let s = 0; s < spec.steps; s++) {
        t0 = now();
        f = step(tokens[tokens.length - 1], s, out);
        out = await session.run(f);
        tokens.push(argmaxLast(out.logits));
        times.push(ms(t0));
      }
      const seen = [];
      for (let i = 0; f && i < spec.runs; i++) {
        t0 = now();
        argmaxLast((await session.run(f)).logits);
        seen.push(ms(t0));
      }
      seen.sort((a, b) => a - b);
      gens.push({ prefill_ms: prefill, token_ms: times, tokens,
                  seen_step_ms: seen.length ? seen[Math.floor(seen.length / 2)] : null });
    } catch (e) {
      gens.push({ error: firstLine(e) });
    }
  }
  return { generations: gens };
}

// The concat form: 0-length pasts for the prompt, the presents fed back.
function decode(session, spec) {
  const [ids, ...pastNames] = spec.inputs;
  const [heads, headDim] = spec.past_shape;
  const prompt = spec.prompt.flat();  // [[ids]]: batch 1
  return greedy(session, spec, () => {
    const feeds = { [ids]: int64(prompt, [1, prompt.length]) };
    for (const n of pastNames) {
      feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, headDim]);
    }
    return feeds;
  }, (token, s, out) => {
    const f = { [ids]: int64([token], [1, 1]) };
    pastNames.forEach((n) => { f[n] = out[n.replace('past_', 'present_')]; });
    return f;
  });
}

// The static-cache form: zeroed caches, `pos` the slot the step writes.
function staticDecode(session, spec) {
  const prompt = spec.prompt.flat();
  return greedy(session, spec, () => {
    const feeds = { [spec.ids]: int64(prompt, [1, prompt.length]), [spec.pos]: int64([0], [1]) };
    for (const [name, , dims] of spec.cache) {
      const n = dims.reduce((a, b) => a * b, 1);
      feeds[name] = new ort.Tensor('float32', new Float32Array(n), dims);
    }
    return feeds;
  }, (token, s, out) => {
    const f = { [spec.ids]: int64([token], [1, 1]), [spec.pos]: int64([prompt.length + s], [1]) };
    for (const [name, present] of spec.cache) f[name] = out[present];
    return f;
  });
}

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const t0 = now();
  const session = await createSession(spec.model, spec.threads);
  const result = { peer: 'onnxruntime', version: version(),
                   threads: Number(spec.threads), create_ms: ms(t0) };
  const run = { decode, static_decode: staticDecode }[spec.kind] || shapes;
  Object.assign(result, await run(session, spec));
  console.log(JSON.stringify(result));
}

main().catch((e) => { console.log(JSON.stringify({ error: firstLine(e) })); process.exit(1); });
