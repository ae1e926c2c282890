/** The router's call history: fed by its log, read by the admin and tenant services. */
export { BACKFILL_EVENTS_PER_CALL, HistoryFeed } from './history-feed.js';
export { callView, historyWindowView } from './call-view.js';
export { CallLogsRelay, type OutputStream } from './call-logs.js';
export {
  adminHistoryHandlers,
  tenantHistoryHandlers,
  type HistoryHandlerOptions,
} from './history-handlers.js';
