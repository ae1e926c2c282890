/** Admission: the queue of calls that do not fit now, its fair order, admission and leaving. */
export { decideAdmit, type AdmitDecision, type AdmitInput } from './admit.js';
export { fairOrder, slotsHeld, slotsHeldBy, type TenantTurn } from './fair-order.js';
export { decideLeaveQueue, queueTimeoutMessage, type LeaveInput } from './leave.js';
export {
  callOf,
  MAX_QUEUED,
  queueFull,
  queuedCount,
  queueing,
  queueTenant,
  slotCapReached,
} from './queue-rules.js';
export { mayAdmitAfter, reportOpensRoom, type RoomDecision, type RoomReport } from './room.js';
