// Runs an ONNX model in ONNX Runtime (onnxruntime-node) with its own profiler
// on (session option enableProfiling): all graph optimizations, N intra-op
// threads, sequential execution, the same fixed float32 inputs as ort_run.js.
// Prints one JSON line: the profile file ORT wrote, the number of warm-up and
// timed runs (the profile holds both; bench/ops.py keeps the timed ones), and
// the median wall time of the timed runs.
// Usage: node ort_profile.js MODEL.onnx PREFIX [threads] [warmup] [runs] [SHAPES_JSON]
const { ort, createSession, fixedFeeds, timeRuns, version } = require('./ort_common');

async function main() {
  const [model, prefix, threads = '2', warmup = '10', runs = '50', shapes] = process.argv.slice(2);
  const session = await createSession(model, threads,
                                      { enableProfiling: true, profileFilePrefix: prefix });
  const feeds = fixedFeeds(session);
  // SHAPES (optional JSON {input: dims}): those inputs at those dims, same values' pattern.
  for (const [name, dims] of Object.entries(shapes ? JSON.parse(shapes) : {})) {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (i % 7) * 0.5;
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  const times = await timeRuns(session, feeds, warmup, runs);
  // endProfiling() returns nothing in some versions; the file is PREFIX_<date>.json.
  let file = session.endProfiling ? session.endProfiling() : undefined;
  if (session.release) await session.release();
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: version(),
    model, threads: Number(threads), warmup: Number(warmup), runs: Number(runs),
    profile: typeof file === 'string' ? file : null,
    median_ms: times[Math.floor(times.length / 2)],
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
