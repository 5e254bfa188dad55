// One zoo model in ONNX Runtime (onnxruntime-node) for scripts/zoo.py: the
// inputs zoo.py wrote (raw little-endian files + a JSON manifest), all graph
// optimizations, N intra-op threads; writes the outputs beside them and prints
// one JSON line (session creation, median/min run time, peak RSS).
// Usage: node zoo_ort.js MANIFEST.json OUTDIR threads min_runs budget_ms
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'bench', 'node_modules', 'onnxruntime-node'));

const ARRAYS = {
  float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array,
  float64: Float64Array, uint8: Uint8Array, int8: Int8Array,
};

async function main() {
  const [manifestPath, outDir, threads = '2', minRuns = '3', budgetMs = '2000'] =
    process.argv.slice(2);
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(manifest.model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = {};
  manifest.inputs.forEach((inp, i) => {
    const buf = fs.readFileSync(inp.file);
    const A = ARRAYS[inp.dtype];
    const data = new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    feeds[session.inputNames[i]] = new ort.Tensor(inp.dtype, data, inp.shape);
  });
  let out = await session.run(feeds);         // first run: also the warm-up
  const times = [];
  const start = process.hrtime.bigint();
  while (times.length < Number(minRuns) ||
         (Number(process.hrtime.bigint() - start) / 1e6 < Number(budgetMs) && times.length < 50)) {
    const s = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  times.sort((a, b) => a - b);
  const outputs = session.outputNames.map((name, i) => {
    const t = out[name];
    const file = path.join(outDir, 'ort_out' + i + '.bin');
    const d = t.data;
    fs.writeFileSync(file, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    return { name, dtype: t.type, shape: t.dims, file };
  });
  console.log(JSON.stringify({
    create_ms: createMs, median_ms: times[Math.floor(times.length / 2)], min_ms: times[0],
    runs: times.length, rss_mb: process.resourceUsage().maxRSS / 1024, outputs,
  }));
}

main().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
