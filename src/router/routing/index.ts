/** Tenant-pinned versions (shell): pin changes and status, and telling workers what to keep. */
export { pinHandlers, type PinHandlers, type PinServiceOptions } from './pin-service.js';
export { pinStatusOf } from './pin-status-view.js';
export { ResidencyKeeper, type ResidencyKeeperOptions } from './residency-keeper.js';
