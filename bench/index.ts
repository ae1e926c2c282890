/**
 * `npm run bench -- <name> [...]`: runs benchmarks and prints one JSON document each. Every figure
 * stands beside a baseline measured in the same run, with their ratio.
 */
const BENCHMARKS: Record<string, () => Promise<unknown>> = {
  events: async () => (await import('./events.js')).run(),
  placement: async () => (await import('./placement.js')).run(),
  replay: async () => (await import('./replay.js')).run(),
  routing: async () => (await import('./routing.js')).run(),
  e2e: async () => (await import('./e2e.js')).run(),
  router: async () => (await import('./router.js')).run(),
  worker: async () => (await import('./worker.js')).run(),
  images: async () => (await import('./images.js')).run(),
  'image-placement': async () => (await import('./image-placement.js')).run(),
  fanout: async () => (await import('./fanout.js')).run(),
  'fanout-peers': async () => (await import('./fanout-peers.js')).run(),
  failover: async () => (await import('./failover.js')).run(),
  state: async () => (await import('./state.js')).run(),
  streams: async () => (await import('./stream-abuse.js')).run(),
  queue: async () => (await import('./queue.js')).run(),
  history: async () => (await import('./history.js')).run(),
  retention: async () => (await import('./retention.js')).run(),
  'live-readers': async () => (await import('./live-readers.js')).run(),
  'append-guard': async () => (await import('./append-guard.js')).run(),
};

// Flags (`--...`, and the value after `--days`) are the benchmarks' own (each reads process.argv).
const args = process.argv.slice(2);
const names = args.filter(
  (arg, i) => !arg.startsWith('--') && args[i - 1] !== '--days' && args[i - 1] !== '--events',
);
if (names.length === 0 || names.some((name) => !(name in BENCHMARKS))) {
  process.stderr.write(`usage: npm run bench -- <${Object.keys(BENCHMARKS).join('|')}> ...\n`);
  process.exit(2);
}
for (const name of names) {
  const result = await BENCHMARKS[name]!();
  process.stdout.write(`${JSON.stringify({ benchmark: name, ...(result as object) }, null, 2)}\n`);
}
