// Runs an ONNX model in ONNX Runtime (onnxruntime-node) with its own profiler
// on (session option enableProfiling): all graph optimizations, N intra-op
// threads, sequential execution, the same fixed float32 inputs as ort_run.js.
// Prints one JSON line: the profile file ORT wrote, the number of warm-up and
// timed runs (the profile holds both; bench/ops.py keeps the timed ones), and
// the median wall time of the timed runs.
// Usage: node ort_profile.js MODEL.onnx PREFIX [threads] [warmup] [runs]
const ort = require('onnxruntime-node');

async function main() {
  const [model, prefix, threads = '2', warmup = '10', runs = '50'] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    const dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' ? d : 1)) : [1];
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (i % 7) * 0.5;
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  // endProfiling() returns nothing in some versions; the file is PREFIX_<date>.json.
  let file = session.endProfiling ? session.endProfiling() : undefined;
  if (session.release) await session.release();
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: ort.env.versions ? ort.env.versions.common : 'unknown',
    model, threads: Number(threads), warmup: Number(warmup), runs: Number(runs),
    profile: typeof file === 'string' ? file : null,
    median_ms: times[Math.floor(times.length / 2)],
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
