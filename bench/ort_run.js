// Times an ONNX model in ONNX Runtime (onnxruntime-node): all graph
// optimizations, N intra-op threads; fixed float32 inputs of the declared
// shapes. Prints one JSON line with the median and min run time.
// Usage: node ort_run.js MODEL.onnx [threads] [warmup] [runs]
const { createSession, fixedFeeds, timeRuns, version } = require('./ort_common');

async function main() {
  const [model, threads = '2', warmup = '20', runs = '200'] = process.argv.slice(2);
  const t0 = process.hrtime.bigint();
  const session = await createSession(model, threads);
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const times = await timeRuns(session, fixedFeeds(session), warmup, runs);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: version(),
    model, threads: Number(threads), create_ms: createMs,
    median_ms: times[Math.floor(times.length / 2)], min_ms: times[0],
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
