/**
 * A thread of a parallel `replay verify`: verifies the range it is given (`workerData.task`),
 * posts `{ progress: events }` as it reads and `{ result }` at the end.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { verifyRange, type RangeTask } from './verify-range.js';

const { task } = workerData as { task: RangeTask };
const port = parentPort;
if (port === null) throw new Error('verify-thread.ts runs as a worker thread');
const result = await verifyRange(task, (events) => port.postMessage({ progress: events }));
port.postMessage({ result });
