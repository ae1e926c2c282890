/**
 * The container slots of a scripted worker, counted as a real worker counts them (its own pure
 * rule, `admitCall`): a new container takes a slot or is refused `RESOURCE_EXHAUSTED` at the
 * limit; after a call, a session's container is kept (ready) when the call succeeded and every
 * other is destroyed at once, before the call's stream ends; a session's end destroys its
 * container. Each change is reported to the router as a real worker reports it (busy, ready,
 * removed), in order, and the reports can be held back (`hold`) and let go (`flush`), to play the
 * registry stream arriving after the call's end or the session's.
 */
import { ContainerState } from '../../../src/proto/gen/readie/v1/registry.js';
import { admitCall } from '../../../src/worker/core/containers/slots.js';

/** Sends one container report to the router. */
export type ContainerReporter = (containerId: string, state: ContainerState) => Promise<unknown>;

/** A scripted worker's container slots. */
export class ScriptedSlots {
  /** The containers held now (container ID to its session, `''` for none). */
  readonly held = new Map<string, string>();
  /** Every refusal for the container limit, with its words. */
  readonly refusals: string[] = [];
  /** While true, reports wait for `flush()`. */
  hold = false;
  private readonly waiting: Array<[string, ContainerState]> = [];
  private sending: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly maxContainers: number,
    private readonly report: ContainerReporter,
  ) {}

  /** A call wants `containerId` (new, or its session's `reused`): the refusal's words, or null. */
  take(containerId: string, sessionId: string, reused: boolean): string | null {
    if (!reused) {
      const admission = admitCall({
        maxContainers: this.maxContainers,
        held: this.held.size,
        standbys: 0,
      });
      if (!admission.admitted) {
        this.refusals.push(admission.refusal.message);
        return admission.refusal.message;
      }
      this.held.set(containerId, sessionId);
    }
    this.tell(containerId, ContainerState.CONTAINER_STATE_BUSY);
    return null;
  }

  /** The call in `containerId` ended: kept for its session after success, else destroyed. */
  release(containerId: string, ok: boolean): void {
    const sessionId = this.held.get(containerId);
    if (sessionId === undefined) return;
    if (ok && sessionId !== '') {
      this.tell(containerId, ContainerState.CONTAINER_STATE_READY);
      return;
    }
    this.held.delete(containerId);
    this.tell(containerId, ContainerState.CONTAINER_STATE_REMOVED);
  }

  /** The router ended the session of `containerId`: it is destroyed. */
  endSession(containerId: string): boolean {
    if (!this.held.delete(containerId)) return false;
    this.tell(containerId, ContainerState.CONTAINER_STATE_REMOVED);
    return true;
  }

  /** Sends the reports held back, in order; resolves once the router answered them all. */
  flush(): Promise<unknown> {
    this.hold = false;
    for (const [containerId, state] of this.waiting.splice(0)) this.send(containerId, state);
    return this.sending;
  }

  private tell(containerId: string, state: ContainerState): void {
    if (this.hold) this.waiting.push([containerId, state]);
    else this.send(containerId, state);
  }

  private send(containerId: string, state: ContainerState): void {
    this.sending = this.sending.then(() => this.report(containerId, state)).catch(() => undefined);
  }
}
