/*
 * The dashboard of `readie ui`: asks its own server (which asks the router's AdminService) every
 * few seconds and redraws. Read-only. Every string from the router is set as text, never as HTML:
 * tenants write request IDs, function names, messages and output.
 */
(function () {
  'use strict';
  const { el, renderTimeline } = window.readieTimeline;
  const REFRESH_MS = Number(document.documentElement.dataset.refreshMs || 2000);
  let chosen = new URLSearchParams(location.hash.slice(1)).get('call');
  let lastCalls = [];
  let lastWorkers = [];

  function bytes(n) {
    if (n === undefined || n === null) return '?';
    const units = [
      ['TiB', 1024 ** 4],
      ['GiB', 1024 ** 3],
      ['MiB', 1024 ** 2],
      ['KiB', 1024],
    ];
    for (const [unit, factor] of units)
      if (n >= factor) return (n / factor).toFixed(n / factor >= 10 ? 0 : 1) + unit;
    return n + 'B';
  }

  function ago(iso) {
    if (!iso) return '-';
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 120
      ? s + 's ago'
      : s < 7200
        ? Math.round(s / 60) + 'm ago'
        : Math.round(s / 3600) + 'h ago';
  }

  async function getJson(path) {
    const response = await fetch(path, { headers: { accept: 'application/json' } });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  function renderStatus(status) {
    lastWorkers = status.workers;
    document.getElementById('router-facts').textContent =
      'router ' +
      status.routerVersion +
      ', log seq ' +
      status.lastSeq +
      (status.catalogueRevision ? ', catalogue ' + status.catalogueRevision : '') +
      ', ' +
      status.callsInFlight +
      ' calls in flight';
    fill(
      document.querySelector('#workers tbody'),
      status.workers.map(function (worker) {
        const held = worker.containers.length;
        const slots =
          held + ' / ' + (worker.maxContainers === undefined ? '∞' : worker.maxContainers);
        const memory =
          bytes(worker.memoryUsed) +
          ' + ' +
          bytes(worker.memoryReserved) +
          ' / ' +
          bytes(worker.memoryTotal);
        return el(
          'tr',
          { 'data-worker': worker.workerId },
          el('td', {}, worker.workerId),
          el('td', {}, worker.status + (worker.reason ? ' (' + worker.reason + ')' : '')),
          el('td', {}, worker.flavor),
          el('td', { 'data-field': 'slots' }, slots),
          el('td', { 'data-field': 'in-flight' }, String(worker.inFlight)),
          el('td', {}, memory),
          el('td', {}, ago(worker.lastReportAt)),
        );
      }),
    );
  }

  function renderPins(pins) {
    if (!pins) return;
    fill(
      document.querySelector('#pins tbody'),
      (pins.pins || []).map(function (pin) {
        return el(
          'tr',
          {},
          el('td', {}, pin.tenantId),
          el('td', {}, pin.version || '(none)'),
          el('td', {}, String(pin.k)),
          el('td', {}, String(pin.revision)),
          el(
            'td',
            {},
            (pin.subset || [])
              .map(function (member) {
                return member.workerId + ' (' + member.state + ')';
              })
              .join(', '),
          ),
        );
      }),
    );
    const rows = [];
    for (const worker of pins.workers || []) {
      for (const version of worker.versions || []) {
        rows.push(
          el(
            'tr',
            {},
            el('td', {}, worker.workerId),
            el('td', {}, version.checkpointId),
            el('td', {}, version.state + (version.protected ? ', protected' : '')),
          ),
        );
      }
    }
    fill(document.querySelector('#residency tbody'), rows);
  }

  function filterQuery() {
    const form = new FormData(document.getElementById('filters'));
    const query = new URLSearchParams();
    for (const name of ['tenant', 'function', 'since']) {
      const value = String(form.get(name) || '').trim();
      if (value) query.set(name, value);
    }
    if (form.get('failed')) query.set('failed', '1');
    return query.toString();
  }

  function renderCalls(answer) {
    lastCalls = answer.calls;
    fill(
      document.querySelector('#calls tbody'),
      answer.calls.map(function (call) {
        const row = el(
          'tr',
          {
            class: call.state + (call.requestId === chosen ? ' chosen' : ''),
            'data-request': call.requestId,
          },
          el('td', {}, call.requestId),
          el('td', {}, call.tenantId || '-'),
          el('td', {}, call.function || '-'),
          el('td', {}, stateText(call)),
          el('td', {}, call.code || '-'),
          el('td', {}, ago(call.requestedAt)),
          el('td', {}, call.durationMs === undefined ? '-' : call.durationMs + ' ms'),
          el('td', {}, waited(call)),
          el('td', {}, call.workerId || '-'),
        );
        row.addEventListener('click', function () {
          chosen = call.requestId;
          location.hash = new URLSearchParams({ call: chosen }).toString();
          void refresh();
        });
        return row;
      }),
    );
    const w = answer.window;
    if (w) {
      document.getElementById('window').textContent =
        'history: ' +
        w.calls +
        ' of at most ' +
        w.maxCalls +
        ' calls' +
        (w.oldestRequestedAt ? ' since ' + w.oldestRequestedAt : '') +
        ', about ' +
        bytes(w.approxBytes);
    }
  }

  /** A call's state as the table shows it: a batch that ended with raised inputs says how many. */
  function stateText(call) {
    if (!call.inputsRaised) return call.state;
    return call.state + ', ' + call.inputsRaised + ' of ' + call.inputs + ' inputs raised';
  }

  /** How long a call waited in the admission queue (so far, for one still waiting); '' for none. */
  function waited(call) {
    if (call.queueWaitMs !== undefined) return call.queueWaitMs + ' ms';
    if (!call.queuedAt) return '';
    return Math.max(0, Date.now() - Date.parse(call.queuedAt)) + ' ms so far';
  }

  /** The calls the admission queue holds now, of those the call history lists. */
  function renderQueue(answer, failedOnly) {
    const waiting = answer.calls.filter(function (call) {
      return call.state === 'queued';
    });
    fill(
      document.querySelector('#queue tbody'),
      waiting.map(function (call) {
        return el(
          'tr',
          { class: 'queued' },
          el('td', {}, call.requestId),
          el('td', {}, call.tenantId || '-'),
          el('td', {}, call.function || '-'),
          el('td', {}, waited(call)),
          el('td', {}, call.queuedWhy || '-'),
        );
      }),
    );
    document.getElementById('queue-note').textContent = failedOnly
      ? 'Failed only is ticked: queued calls are not listed.'
      : waiting.length === 0
        ? 'No call of those listed below waits in the admission queue.'
        : waiting.length + ' of the calls listed below wait in the admission queue.';
  }

  async function renderChosen() {
    const box = document.getElementById('call');
    if (!chosen) return;
    try {
      const answer = await getJson('/api/call/' + encodeURIComponent(chosen));
      const worker = lastWorkers.find(function (w) {
        return w.workerId === answer.call.workerId;
      });
      renderTimeline(
        box,
        answer.call,
        lastCalls,
        Date.now(),
        worker ? worker.maxContainers : undefined,
      );
    } catch (error) {
      box.replaceChildren(el('p', { class: 'error' }, String(error.message)));
    }
  }

  async function refresh() {
    try {
      const [status, calls] = await Promise.all([
        getJson('/api/status'),
        getJson('/api/calls?' + filterQuery()),
      ]);
      renderStatus(status.status);
      renderPins(status.pins);
      renderCalls(calls);
      renderQueue(calls, Boolean(new FormData(document.getElementById('filters')).get('failed')));
      await renderChosen();
      document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (error) {
      document.getElementById('updated').textContent = 'update failed: ' + error.message;
    }
  }

  document.getElementById('filters').addEventListener('input', function () {
    void refresh();
  });
  document.getElementById('filters').addEventListener('submit', function (event) {
    event.preventDefault();
  });
  void refresh();
  setInterval(function () {
    void refresh();
  }, REFRESH_MS);
})();
