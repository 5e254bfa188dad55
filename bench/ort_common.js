// What the ONNX Runtime bench scripts share: a session with all graph
// optimizations and N intra-op threads, fixed float32 (float16 for a float16
// input) inputs of the declared
// shapes (dynamic dims 1), and timed runs after warm-up.
const ort = require('onnxruntime-node');

function createSession(model, threads, extra = {}) {
  return ort.InferenceSession.create(model, Object.assign({
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  }, extra));
}

// The bits of float16 values that are exact in half: (i % 7) * 0.5 are.
function halfBits(v) {
  if (v === 0) return 0;
  const e = Math.floor(Math.log2(v));
  return ((e + 15) << 10) | Math.round((v / 2 ** e - 1) * 1024);
}

function fixedFeeds(session) {
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    const dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' ? d : 1)) : [1];
    const n = dims.reduce((a, b) => a * b, 1);
    if (meta && meta.type === 'float16') {   // a float16 model's input
      const data = new Uint16Array(n);
      for (let i = 0; i < n; i++) data[i] = halfBits((i % 7) * 0.5);
      feeds[name] = new ort.Tensor('float16', data, dims);
      continue;
    }
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (i % 7) * 0.5;
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  return feeds;
}

// Run times in ms, sorted, of `runs` runs after `warmup` untimed ones.
async function timeRuns(session, feeds, warmup, runs) {
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  return times.sort((a, b) => a - b);
}

function version() {
  return ort.env.versions ? ort.env.versions.common : 'unknown';
}

module.exports = { ort, createSession, fixedFeeds, timeRuns, version };
