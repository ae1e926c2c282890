/** The event vocabulary, its codecs and the LMDB event log: the public face of `src/events`. */
export * from './catalogue.js';
export * from './cause.js';
export * from './decode.js';
export * from './errors.js';
export * from './projection.js';
export * from './schema.js';
export * from './schema-errors.js';
export * from './types.js';
export * from './upcast.js';
export { EventLog, type AppendResult, type EventLogOptions } from './lmdb/event-log.js';
export { readJsonl, writeJsonl, type JsonlEvent } from './jsonl/jsonl.js';
