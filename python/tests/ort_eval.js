// Runs an ONNX model in ONNX Runtime (onnxruntime-node, all graph
// optimizations) on given float32 inputs and prints its outputs as JSON; the
// quantizer tests compare cge's results with it.
// Usage: node ort_eval.js MODEL.onnx SPEC.json   (SPEC: {name: {dims, file}}, raw float32 files)
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.env.ORT_NODE_MODULES, 'onnxruntime-node'));

async function main() {
  const [model, specPath] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const feeds = {};
  for (const [name, s] of Object.entries(spec)) {
    const buf = fs.readFileSync(s.file);
    feeds[name] = new ort.Tensor('float32', new Float32Array(buf.buffer, buf.byteOffset,
      buf.length / 4), s.dims);
  }
  const out = await session.run(feeds);
  const res = {};
  for (const name of session.outputNames) res[name] = { dims: out[name].dims, data: Array.from(out[name].data) };
  console.log(JSON.stringify(res));
}

main().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
