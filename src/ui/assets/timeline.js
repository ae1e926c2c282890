/*
 * One call's timeline, shared by the dashboard (`readie ui`) and the HTML incident report
 * (`replay report --html`): its steps as a table and as a chart (Observable Plot), and the calls
 * in flight on its worker around it. Every tenant string reaches the page through textContent or
 * Plot's text marks (which set text, never HTML): request IDs, function names and messages are
 * written by tenants.
 */
(function (global) {
  'use strict';

  /** `el('td', {class: 'x'}, 'text')`: an element with attributes and text children, never HTML. */
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }

  function offset(ms) {
    if (!Number.isFinite(ms)) return '';
    if (ms < 1000) return '+' + Math.round(ms) + 'ms';
    return '+' + (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + 's';
  }

  /** The call's steps: [{step, at (ISO), detail}], in order, from a CallView. */
  function stepsOf(call) {
    const steps = [{ step: 'requested', at: call.requestedAt, detail: 'seq ' + call.requestedSeq }];
    if (call.turnWaitMs !== undefined) {
      steps.push({
        step: 'turn waited',
        at: call.requestedAt,
        detail: call.turnWaitMs + "ms for its session's turn before it was requested",
      });
    }
    if (call.queuedAt)
      steps.push({ step: 'queued', at: call.queuedAt, detail: call.queuedWhy || '' });
    if (call.admittedAt) {
      steps.push({
        step: 'admitted',
        at: call.admittedAt,
        detail: 'after ' + call.queueWaitMs + ' ms in the queue',
      });
    }
    (call.attempts || []).forEach(function (attempt, index) {
      const where = [
        'worker ' + attempt.workerId,
        attempt.containerId ? 'container ' + attempt.containerId : 'a new container',
        attempt.checkpointId ? 'checkpoint ' + attempt.checkpointId : 'cold start',
      ];
      if (attempt.version)
        where.push('version ' + attempt.version + ' (revision ' + attempt.routingRevision + ')');
      if (attempt.coldLoad) where.push('cold load');
      steps.push({
        step: index === 0 ? 'placed' : 'placed again',
        at: attempt.placedAt,
        detail: where.join(', '),
      });
      if (attempt.dialError)
        steps.push({ step: 'dial failed', at: attempt.dialFailedAt, detail: attempt.dialError });
    });
    if (call.boundAt) {
      steps.push({
        step: 'bound',
        at: call.boundAt,
        detail:
          'container ' +
          call.containerId +
          (call.checkpointId ? ' (checkpoint ' + call.checkpointId + ')' : ''),
      });
    }
    if (call.finishedAt) {
      const left = call.state === 'rejected' && call.queuedAt && !call.admittedAt;
      const word = left
        ? 'left queue'
        : call.state === 'rejected'
          ? 'refused'
          : call.state === 'expired'
            ? 'released'
            : 'finished';
      steps.push({
        step: word,
        at: call.finishedAt,
        detail: [call.code, call.message].filter(Boolean).join(': '),
      });
    }
    return steps;
  }

  /** The phases between steps, as bars: [{phase, start, end}]. */
  function phasesOf(call, now) {
    const t = (iso) => (iso ? new Date(iso) : null);
    const end = t(call.finishedAt) || new Date(now);
    const phases = [];
    const attempts = call.attempts || [];
    const firstPlaced = attempts.length > 0 ? t(attempts[0].placedAt) : end;
    if (call.queuedAt) {
      const admitted = t(call.admittedAt) || (attempts.length > 0 ? firstPlaced : end);
      phases.push({ phase: 'placing', start: t(call.requestedAt), end: t(call.queuedAt) });
      phases.push({ phase: 'queued', start: t(call.queuedAt), end: admitted });
      phases.push({ phase: 'placing', start: admitted, end: firstPlaced });
    } else {
      phases.push({ phase: 'placing', start: t(call.requestedAt), end: firstPlaced });
    }
    attempts.forEach(function (attempt, index) {
      const next = attempt.dialError ? t(attempt.dialFailedAt) : t(call.boundAt) || end;
      phases.push({
        phase: attempt.dialError ? 'dial failed' : 'starting',
        worker: attempt.workerId,
        start: t(attempt.placedAt),
        end: next,
        attempt: index + 1,
      });
    });
    if (call.boundAt) phases.push({ phase: 'running', start: t(call.boundAt), end: end });
    return phases.filter(function (p) {
      return p.start && p.end;
    });
  }

  /** Calls in flight on `workerId` over time, from `calls` (CallViews), in [from, to]. */
  function inFlightOn(calls, workerId, from, to) {
    const edges = [];
    for (const other of calls) {
      if (other.workerId !== workerId || !other.boundAt) continue;
      const start = Date.parse(other.boundAt);
      const stop = other.finishedAt ? Date.parse(other.finishedAt) : to;
      if (stop < from || start > to) continue;
      edges.push([Math.max(start, from), 1], [Math.min(stop, to), -1]);
    }
    edges.sort(function (a, b) {
      return a[0] - b[0] || a[1] - b[1];
    });
    const points = [{ at: new Date(from), calls: 0 }];
    let level = 0;
    for (const [at, change] of edges) {
      level += change;
      points.push({ at: new Date(at), calls: level });
    }
    points.push({ at: new Date(to), calls: level });
    return points;
  }

  /** A batch's inputs as the call's summary shows them: `25`, `25, 2 raised`. */
  function inputsText(call) {
    return call.inputsRaised
      ? call.inputs + ', ' + call.inputsRaised + ' raised'
      : String(call.inputs);
  }

  /**
   * Renders `call` into `container`: a summary, the step table, the phases chart and, when
   * `around` (other CallViews) is given, the calls in flight on its worker around it, beside its
   * slots (`capacity`, when known).
   */
  function renderTimeline(container, call, around, now, capacity) {
    container.replaceChildren();
    const summary = el('dl', { class: 'call-summary' });
    const facts = [
      ['request', call.requestId],
      ['tenant', call.tenantId || '-'],
      ['function', call.function || '-'],
      ['session', call.sessionId || '-'],
      ['state', call.state + (call.code ? ' (' + call.code + ')' : '')],
      ['worker', call.workerId || '-'],
      ['took', call.durationMs === undefined ? '-' : call.durationMs + ' ms'],
    ];
    if (call.inputs !== undefined) facts.splice(5, 0, ['inputs', inputsText(call)]);
    if (call.message) facts.push(['message', call.message]);
    for (const [name, value] of facts)
      summary.append(el('dt', {}, name), el('dd', { 'data-field': name }, value));
    container.append(summary);

    const steps = stepsOf(call);
    const first = Date.parse(call.requestedAt);
    const table = el(
      'table',
      { class: 'steps' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          el('th', {}, 'step'),
          el('th', {}, 'at'),
          el('th', {}, 'offset'),
          el('th', {}, 'detail'),
        ),
      ),
    );
    const body = el('tbody', {});
    for (const step of steps) {
      body.append(
        el(
          'tr',
          { 'data-step': step.step },
          el('td', {}, step.step),
          el('td', {}, step.at),
          el('td', {}, offset(Date.parse(step.at) - first)),
          el('td', {}, step.detail),
        ),
      );
    }
    table.append(body);
    container.append(table);

    const phases = phasesOf(call, now);
    if (phases.length > 0 && typeof Plot !== 'undefined') {
      const chart = Plot.plot({
        height:
          60 +
          28 *
            new Set(
              phases.map(function (p) {
                return p.phase;
              }),
            ).size,
        marginLeft: 90,
        x: { type: 'time', label: null },
        y: {
          label: null,
          domain: ['placing', 'queued', 'dial failed', 'starting', 'running'].filter(
            function (name) {
              return phases.some(function (p) {
                return p.phase === name;
              });
            },
          ),
        },
        color: {
          domain: ['placing', 'queued', 'dial failed', 'starting', 'running'],
          range: ['#9aa5b1', '#b8860b', '#d64545', '#e8a33d', '#3c9d5d'],
        },
        marks: [
          Plot.barX(phases, {
            x1: 'start',
            x2: 'end',
            y: 'phase',
            fill: 'phase',
            title: function (p) {
              return p.phase + (p.worker ? ' on ' + p.worker : '');
            },
          }),
          Plot.text(
            phases.filter(function (p) {
              return p.worker;
            }),
            { x: 'start', y: 'phase', text: 'worker', dx: 4, textAnchor: 'start', fill: 'white' },
          ),
        ],
      });
      chart.setAttribute('class', 'timeline-chart');
      container.append(el('h3', {}, 'Timeline'), chart);
    }
    if (around && call.workerId && typeof Plot !== 'undefined') {
      const from = first - 30000;
      const to = (call.finishedAt ? Date.parse(call.finishedAt) : now) + 30000;
      const points = inFlightOn(around, call.workerId, from, to);
      const peak = Math.max(
        1,
        capacity || 0,
        ...points.map(function (p) {
          return p.calls;
        }),
      );
      const chart = Plot.plot({
        height: 140,
        x: { type: 'time', label: null, domain: [new Date(from), new Date(to)] },
        y: { label: 'calls running on ' + call.workerId, grid: true, domain: [0, peak] },
        marks: [
          Plot.ruleY(capacity ? [capacity] : [], { stroke: '#d64545', strokeDasharray: '2 2' }),
          Plot.areaY(points, { x: 'at', y: 'calls', curve: 'step-after', fill: '#c6dbef' }),
          Plot.lineY(points, { x: 'at', y: 'calls', curve: 'step-after' }),
          Plot.ruleX([new Date(first)], { stroke: '#3c6e9d' }),
          Plot.ruleX(call.finishedAt ? [new Date(call.finishedAt)] : [], {
            stroke: '#3c6e9d',
            strokeDasharray: '4 2',
          }),
        ],
      });
      chart.setAttribute('class', 'slots-chart');
      container.append(el('h3', {}, 'Its worker around it'), chart);
    }
  }

  global.readieTimeline = {
    el: el,
    stepsOf: stepsOf,
    phasesOf: phasesOf,
    inFlightOn: inFlightOn,
    renderTimeline: renderTimeline,
  };
})(window);
