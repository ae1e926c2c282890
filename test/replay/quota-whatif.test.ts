/**
 * `replay whatif --quota`, given / when / then (docs/quotas.md, "What if"): given a log the core
 * decided (calls, admissions, quota changes, each append with its cause), when its admissions are
 * decided again under another quota table, then the changed decisions and the calls that would
 * wait longer, wait less or be refused. Also the flags' bad input, refused naming flag and field.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decide } from '../../src/core/decisions.js';
import { causeText, type Cause } from '../../src/events/cause.js';
import type { NewEvent } from '../../src/events/index.js';
import { QuotaWhatif, type QuotaWhatifChange } from '../../replay/engine/quota-whatif.js';
import { parseQuotaTable } from '../../replay/commands/quota-options.js';
import { ReplayInputError } from '../../replay/io/replay-input-error.js';
import { demand, finished, history, registered, started, type History } from '../support/events.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const QUEUE = { QUEUE_TIMEOUT: 600_000 };

/** Appends events as one append of `cause`, as the router's journal does. */
function append(given: History, cause: Cause, events: readonly NewEvent[]): void {
  given.add(
    ...events.map((event) => ({ ...event, cause: causeText(cause) }) as unknown as NewEvent),
  );
}

/** A call of `tenantId`, decided and appended; then admission, as the router runs it. */
function call(given: History, requestId: string, tenantId: string): void {
  const made = decide('call', given.state(), {
    call: { requestId, sessionId: null, tenantId, demand: demand() },
  });
  append(given, made.cause, made.events);
}

/** Admission decided and appended again and again until it admits nothing. */
function admit(given: History): void {
  for (;;) {
    const made = decide('admit', given.state(), {});
    if (made.requestId === null) return;
    append(given, made.cause, made.events);
  }
}

function finish(given: History, requestId: string): void {
  append(given, { kind: 'end', requestId }, [finished(requestId)]);
  admit(given);
}

function quota(given: History, tenantId: string, maxSlots: number | null): void {
  const made =
    maxSlots === null
      ? decide('quotaRemove', given.state(), { tenantId, expectRevision: null })
      : decide('quotaSet', given.state(), {
          tenantId,
          weight: null,
          maxSlots,
          maxQueued: null,
          expectRevision: null,
        });
  append(given, made.cause, made.events);
  admit(given);
}

/** A cluster of one worker with `slots` slots, the queue in force. */
function cluster(slots: number): History {
  const given = history();
  append(given, { kind: 'start' }, [started(QUEUE)]);
  append(given, { kind: 'report', workerId: 'w1' }, [registered('w1', { maxContainers: slots })]);
  return given;
}

/** The log decided again under the table `flags` give. */
function whatif(given: History, ...flags: string[]) {
  const quotas = parseQuotaTable(flags);
  if (quotas === null) throw new Error('no table');
  const engine = new QuotaWhatif({ quotas });
  for (const event of given.events) engine.push(event);
  return engine.end();
}

function brief(change: QuotaWhatifChange) {
  const { change: kind, requestId, waitsLonger, waitsLess, refused } = change;
  return { kind, requestId, waitsLonger, waitsLess, refused };
}

/** Three slots: a holds two, b one; a3 then b2 queue; a1 ends: tie at 1 slot each, a3 first. */
function tie(): History {
  const given = cluster(3);
  for (const [id, tenant] of [
    ['a1', 'a'],
    ['a2', 'a'],
    ['b1', 'b'],
    ['a3', 'a'],
    ['b2', 'b'],
  ] as const) {
    call(given, id, tenant);
  }
  finish(given, 'a1');
  return given;
}

describe('replay whatif --quota', () => {
  after(cleanTempDirs);

  it('given a tie the tenant ID broke, when b weighs 2, then b2 is admitted first: a3 waits longer, b2 less', () => {
    const given = tie();
    const admitted = given.events.filter((e) => e.type === 'CallAdmitted');
    expect(admitted.map((e) => e.type === 'CallAdmitted' && e.requestId)).to.deep.equal(['a3']);
    const { changes, calls } = whatif(given, 'tenant=b,weight=2');
    expect(calls).to.equal(5);
    expect(changes.map(brief)).to.deep.equal([
      {
        kind: 'admitted-another',
        requestId: 'a3',
        waitsLonger: ['a3'],
        waitsLess: ['b2'],
        refused: [],
      },
    ]);
    expect(changes[0]).to.deep.include({
      seq: admitted[0]!.seq,
      before: 'admits a3',
      after: 'admits b2 first',
    });
  });

  it('given the same log, when the table changes nothing it decides, then nothing changes', () => {
    expect(whatif(tie(), 'tenant=a,weight=1', 'tenant=b,max-queued=5').changes).to.deep.equal([]);
  });

  it('given room for a2, when a may hold 1 slot, then a2 waits (placed -> queued) and at the admission b2 goes first', () => {
    const { changes } = whatif(tie(), 'tenant=a,max-slots=1');
    expect(changes.map(brief)).to.deep.equal([
      {
        kind: 'placed-to-queued',
        requestId: 'a2',
        waitsLonger: ['a2'],
        waitsLess: [],
        refused: [],
      },
      {
        kind: 'admitted-another',
        requestId: 'a3',
        waitsLonger: ['a3'],
        waitsLess: ['b2'],
        refused: [],
      },
    ]);
    expect(changes[0]?.after).to.match(/^queued: /);
  });

  it('given the same log, when both tenants may hold 1 slot, then the admission admits none, saying why', () => {
    const { changes } = whatif(tie(), 'tenant=a,max-slots=1', 'tenant=b,max-slots=1');
    const admission = changes.find((c) => c.change === 'admits-none');
    expect(admission).to.deep.include({ requestId: 'a3', waitsLonger: ['a3'] });
    expect(admission?.after).to.equal("admits none: tenant a holds 1 slot, its quota's maxSlots 1");
  });

  it('given a cap that held a2 back while b1 freed a slot, when the table has no cap, then a2 is admitted earlier, at that slot', () => {
    const given = cluster(2);
    quota(given, 'a', 1);
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    call(given, 'a2', 'a');
    finish(given, 'b1');
    const freed = given.lastSeq;
    expect(given.state().queue.has('a2')).to.equal(true);
    quota(given, 'a', null);
    const admission = given.events.find((e) => e.type === 'CallAdmitted');
    expect(admission).to.deep.include({ requestId: 'a2' });
    const { changes } = whatif(given, 'none');
    expect(changes.map(brief)).to.deep.equal([
      {
        kind: 'admitted-earlier',
        requestId: 'a2',
        waitsLonger: [],
        waitsLess: ['a2'],
        refused: [],
      },
    ]);
    expect(changes[0]).to.deep.include({ seq: freed, recordedAdmission: admission?.seq });
    expect(changes[0]?.before).to.equal(
      "admits none: tenant a holds 1 slot, its quota's maxSlots 1",
    );
  });

  it('given a cap that queued a2 though the cluster had room, when the table has no cap, then a2 is placed at once', () => {
    const given = cluster(2);
    quota(given, 'a', 1);
    call(given, 'a1', 'a');
    call(given, 'a2', 'a');
    expect(given.state().queue.has('a2')).to.equal(true);
    const { changes } = whatif(given, 'none');
    expect(changes.map(brief)).to.deep.equal([
      {
        kind: 'queued-to-placed',
        requestId: 'a2',
        waitsLonger: [],
        waitsLess: ['a2'],
        refused: [],
      },
    ]);
  });

  it('given two calls of b queued, when b may queue 1, then the second is refused', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    call(given, 'b2', 'b');
    const { changes } = whatif(given, 'tenant=b,max-queued=1');
    expect(changes.map(brief)).to.deep.equal([
      {
        kind: 'queued-to-refused',
        requestId: 'b2',
        waitsLonger: [],
        waitsLess: [],
        refused: ['b2'],
      },
    ]);
    expect(changes[0]?.after).to.match(
      /^refused RESOURCE_EXHAUSTED: the admission queue holds 1 call of tenant b/,
    );
  });

  describe('bad input names the flag and the field', () => {
    const refused = (flags: string[], file?: string) => {
      try {
        parseQuotaTable(flags, file);
      } catch (error) {
        expect(error).to.be.instanceOf(ReplayInputError);
        return (error as Error).message;
      }
      throw new Error('accepted');
    };

    it('--quota: unknown field, no tenant, zero or negative weight, caps that are not whole, a tenant twice', () => {
      expect(refused(['tenant=b,colour=red'])).to.equal(
        '--quota tenant=b,colour=red: unknown field "colour" (fields: tenant, weight, max-slots, max-queued)',
      );
      expect(refused(['weight=2'])).to.equal('--quota weight=2: names no tenant');
      expect(refused(['tenant=b,weight=0'])).to.equal(
        '--quota tenant=b,weight=0: weight must be a number above 0 and at most 1000000 (got 0)',
      );
      expect(refused(['tenant=b,weight=-1'])).to.contain('weight must be a number above 0');
      expect(refused(['tenant=b,weight=heavy'])).to.equal(
        '--quota tenant=b,weight=heavy: weight: expected a number, got "heavy"',
      );
      expect(refused(['tenant=b,max-slots=2.5'])).to.equal(
        '--quota tenant=b,max-slots=2.5: maxSlots must be a whole number, at least 1 and at most 1000000 (got 2.5)',
      );
      expect(refused(['tenant=b,max-queued=0'])).to.contain('maxQueued must be a whole number');
      expect(refused(['tenant=b', 'tenant=b,weight=2'])).to.equal(
        '--quota: tenant b is given twice',
      );
      expect(parseQuotaTable([])).to.equal(null);
      expect(parseQuotaTable(['none'])?.entries.size).to.equal(0);
      expect(refused(['none', 'tenant=b'])).to.equal(
        '--quota none is the empty table (every tenant on the defaults): give it alone',
      );
      const table = parseQuotaTable(['tenant=b,weight=3,max-slots=none']);
      expect(table?.entries.get('b')).to.deep.include({
        weight: 3,
        maxSlots: null,
        maxQueued: 2000,
      });
    });

    it('--quota-file: the shape readie quota status --json prints; unknown fields and bad values named by path', () => {
      const dir = tempDir();
      const file = (name: string, value: unknown) => {
        const path = join(dir, name);
        writeFileSync(path, JSON.stringify(value));
        return path;
      };
      const status = {
        revision: 4,
        quotas: [
          {
            tenantId: 'beta',
            quota: { weight: 3, maxSlots: 4, maxQueued: 50 },
            revision: 4,
            slotsHeld: 1,
            queued: 0,
          },
          {
            tenantId: 'acme',
            quota: { weight: 1, maxQueued: 2000 },
            revision: 2,
            slotsHeld: 0,
            queued: 0,
          },
        ],
        defaults: { weight: 1, maxQueued: 2000 },
      };
      const table = parseQuotaTable([], file('ok.json', status));
      expect(table?.entries.get('beta')).to.deep.include({ weight: 3, maxSlots: 4, maxQueued: 50 });
      expect(table?.entries.get('acme')).to.deep.include({ maxSlots: null });
      const colour = file('colour.json', {
        quotas: [{ tenantId: 'beta', quota: { weight: 3, colour: 'red' } }],
      });
      expect(refused([], colour)).to.equal(
        `--quota-file ${colour}: quotas[0].quota: unknown field "colour" (fields: weight, maxSlots, maxQueued)`,
      );
      const negative = file('negative.json', {
        quotas: [{ tenantId: 'beta', quota: { weight: -2 } }],
      });
      expect(refused([], negative)).to.equal(
        `--quota-file ${negative}: quotas[0].quota: weight must be a number above 0 and at most 1000000 (got -2)`,
      );
      const half = file('half.json', { quotas: [{ tenantId: 'beta', quota: { maxSlots: 1.5 } }] });
      expect(refused([], half)).to.contain('quotas[0].quota: maxSlots must be a whole number');
      expect(refused([], file('text.json', 'x'))).to.match(/expected an object$/);
      expect(refused(['tenant=beta'], file('twice.json', status))).to.equal(
        '--quota: tenant beta is given twice',
      );
    });
  });
});
