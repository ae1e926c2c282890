/**
 * The admission queue part of `readie status`: per tenant, the calls waiting and the oldest
 * one's wait, the slots it holds beside its fair share, its weight and its cap. Pure; the answer's
 * strings (tenant IDs among them) are made printable before a section sees them.
 */
import Table from 'cli-table3';
import type { StatusResponse, TenantQueueView } from '../../proto/gen/readie/v1/admin.js';
import { formatDuration } from '../../shared/units.js';
import { age } from './readable-units.js';

function share(view: TenantQueueView): string {
  return view.fairShare === undefined ? '?' : String(Math.round(view.fairShare * 10) / 10);
}

/** The queue, from the answer's `queue` and `queueTimeoutMs`. */
export const queueSection = {
  title: 'Admission queue',
  render(status: StatusResponse, now: number): string | null {
    const waiting = status.queue.reduce((sum, view) => sum + view.depth, 0);
    const head =
      status.queueTimeoutMs === 0
        ? 'off (QUEUE_TIMEOUT 0: a call that finds no room is refused at once)'
        : `QUEUE_TIMEOUT ${formatDuration(status.queueTimeoutMs)}; ${waiting} call${waiting === 1 ? '' : 's'} waiting`;
    if (status.queue.length === 0) return head;
    const out = new Table({
      head: ['tenant', 'queued', 'oldest wait', 'slots held', 'fair share', 'weight', 'cap'],
      style: { head: [], border: [] },
    });
    out.push(
      ...status.queue.map((view) => [
        view.tenantId === '' ? '(no tenant)' : view.tenantId,
        `${view.depth} / ${view.maxQueued}`,
        view.oldestQueuedAt === '' ? '-' : age(view.oldestQueuedAt, now),
        String(view.slotsHeld),
        share(view),
        String(view.weight),
        view.maxSlots === undefined ? 'none' : String(view.maxSlots),
      ]),
    );
    return `${head}\n${out.toString()}`;
  },
};
