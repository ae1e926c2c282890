/**
 * The typed `Cause` and the log's text for it: one per kind of the vocabulary, written as the
 * router always wrote it, and read back from every log the repository keeps.
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  CAUSE_KINDS,
  CAUSE_PATTERN,
  causeText,
  parseCause,
  type Cause,
} from '../../src/events/index.js';
import { readEvents, ROOT } from '../support/replay.js';

/** One cause of every kind, with the text the router has always recorded for it. */
const EXAMPLES: readonly [Cause, string][] = [
  [{ kind: 'start' }, 'start'],
  [{ kind: 'call', requestId: 'r1' }, 'call:r1'],
  [{ kind: 'answer', requestId: 'r1' }, 'answer:r1'],
  [{ kind: 'end', requestId: 'r1' }, 'end:r1'],
  [{ kind: 'report', workerId: 'w1' }, 'report:w1'],
  [{ kind: 'probe', workerId: 'w1' }, 'probe:w1'],
  [{ kind: 'reaper' }, 'reaper'],
  [{ kind: 'dial', requestId: 'r1' }, 'dial:r1'],
  [{ kind: 'session', sessionId: 's1' }, 'session:s1'],
  [{ kind: 'admin', tenantId: 't1' }, 'admin:t1'],
  [{ kind: 'routing' }, 'routing'],
  [{ kind: 'admit', requestId: 'r1' }, 'admit:r1'],
  [{ kind: 'leave', requestId: 'r1' }, 'leave:r1'],
  [{ kind: 'archive' }, 'archive'],
];

describe('events: causes', () => {
  it('given a cause of every kind, when written, then it is the text the log has always had', () => {
    expect(EXAMPLES.map(([cause]) => cause.kind)).to.have.members([...CAUSE_KINDS]);
    for (const [cause, text] of EXAMPLES) {
      expect(causeText(cause)).to.equal(text);
      expect(text).to.match(new RegExp(CAUSE_PATTERN));
      expect(parseCause(text)).to.deep.equal(cause);
    }
  });

  it('given a subject with a colon, when written and read, then it is kept whole', () => {
    const cause: Cause = { kind: 'call', requestId: 'a:b' };
    expect(causeText(cause)).to.equal('call:a:b');
    expect(parseCause('call:a:b')).to.deep.equal(cause);
  });

  it('given a text that is not a cause, when read, then it is none', () => {
    for (const text of [null, '', 'call', 'call:', 'reaper:x', 'start:', 'nope:r1', 'nope']) {
      expect(parseCause(text), String(text)).to.equal(null);
    }
  });

  it("given every recorded fixture, when its causes are read and written, then they are the log's bytes", () => {
    const dir = join(ROOT, 'fixtures');
    const logs = readdirSync(dir).filter(
      (file) => file.endsWith('.jsonl') && !file.endsWith('.expected.jsonl'),
    );
    expect(logs.length).to.be.at.least(15);
    for (const file of logs) {
      for (const event of readEvents(join(dir, file))) {
        if (event.cause === null) continue;
        const cause = parseCause(event.cause);
        expect(cause, `${file} seq ${event.seq}`).to.not.equal(null);
        expect(causeText(cause!), `${file} seq ${event.seq}`).to.equal(event.cause);
      }
    }
  });
});
