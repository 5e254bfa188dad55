// Times an ONNX model in ONNX Runtime (onnxruntime-node): all graph
// optimizations, N intra-op threads; random float32 inputs of the declared
// shapes. Prints one JSON line with the median and min run time.
// Usage: node ort_run.js MODEL.onnx [threads] [warmup] [runs]
const ort = require('onnxruntime-node');

async function main() {
  const [model, threads = '2', warmup = '20', runs = '200'] = process.argv.slice(2);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
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
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: ort.env.versions ? ort.env.versions.common : 'unknown',
    model, threads: Number(threads), create_ms: createMs,
    median_ms: times[Math.floor(times.length / 2)], min_ms: times[0],
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
