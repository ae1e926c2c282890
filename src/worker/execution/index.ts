/** The worker's ExecutionService: header checks, the call flow, call tracking. */
export * from '../core/execution/call-header.js';
export * from './call-support.js';
export * from './call-tracker.js';
export * from './execute-call.js';
export * from './execution-service.js';
export * from './message-reader.js';
