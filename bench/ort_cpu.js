// Times an ONNX model in ONNX Runtime (onnxruntime-node) as ort_run.js does,
// and also the process CPU time of each run (user + system, every thread):
// on a shared machine the CPU a run takes is far steadier than its wall
// time. Prints one JSON line with the wall median / min and the CPU median.
// Usage: node ort_cpu.js MODEL.onnx [threads] [warmup] [runs]
const { createSession, fixedFeeds, version } = require('./ort_common');

async function main() {
  const [model, threads = '2', warmup = '10', runs = '60'] = process.argv.slice(2);
  const session = await createSession(model, threads);
  const feeds = fixedFeeds(session);
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const cpu = [], wall = [];
  for (let i = 0; i < Number(runs); i++) {
    const c = process.cpuUsage();
    const s = process.hrtime.bigint();
    await session.run(feeds);
    wall.push(Number(process.hrtime.bigint() - s) / 1e6);
    const d = process.cpuUsage(c);
    cpu.push((d.user + d.system) / 1e3);
  }
  cpu.sort((a, b) => a - b);
  wall.sort((a, b) => a - b);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: version(), model, threads: Number(threads),
    median_ms: wall[Math.floor(wall.length / 2)], min_ms: wall[0],
    cpu_ms: cpu[Math.floor(cpu.length / 2)],
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
