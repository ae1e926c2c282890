/**
 * Every decision of the core, by what triggers it: the shells (router, replay, fixture recording)
 * call these and append what they return, and nothing else changes the state. Each one has the
 * shape of `Decide` (the compiler checks it here): the state before and one input in, a
 * `Decision` out.
 */
import { decideBound, decideCall, decideCallEnd } from './calls/call-steps.js';
import { decideDialFailure } from './calls/dial-failure.js';
import type { Decide } from './decision.js';
import { decideProbeFailure, decideProbeSuccess } from './liveness/probe-outcome.js';
import { decideReap } from './liveness/reaper.js';
import {
  decideContainerReport,
  decideStatusReport,
  decideUtilizationReport,
} from './registry/report-events.js';
import { decideSessionEnd } from './sessions/session-end.js';
import { decideStart } from './startup/startup-events.js';

/** The core's decisions, by trigger. */
export const DECISIONS = {
  start: decideStart,
  call: decideCall,
  answer: decideBound,
  dialFailure: decideDialFailure,
  end: decideCallEnd,
  statusReport: decideStatusReport,
  utilizationReport: decideUtilizationReport,
  containerReport: decideContainerReport,
  probeFailure: decideProbeFailure,
  probeSuccess: decideProbeSuccess,
  reaper: decideReap,
  sessionEnd: decideSessionEnd,
} as const satisfies Record<string, Decide<never>>;
