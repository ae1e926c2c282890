/**
 * A first call from the TypeScript client: Python's math.hypot on a worker, with JSON arguments.
 * Configure it as the Python client (READIE_ADDRESS, READIE_CA_FILE, READIE_AUTH_TOKEN), then:
 *
 *     node --import tsx examples/hello.ts
 */
import { ReadieClient } from '../src/client/index.js';

const readie = new ReadieClient();
try {
  const value = await readie.call<number>({ module: 'math', function: 'hypot', args: [3, 4] });
  console.log(`math.hypot(3, 4) = ${value}, computed on a worker`);
} finally {
  readie.close();
}
