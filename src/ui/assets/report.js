/*
 * The HTML incident report (`replay report --html`): lays out the report's JSON (the call, its
 * placement tables, its worker's other calls, the events around it) with the dashboard's
 * timeline. Text only: every string is set as text, never as HTML.
 */
(function () {
  'use strict';
  const { el, renderTimeline } = window.readieTimeline;
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const main = document.getElementById('report');
  const call = data.call;
  document.getElementById('report-title').textContent =
    'call ' + call.requestId + ' from ' + data.log;

  function section(title, ...children) {
    return el('section', {}, el('h2', {}, title), ...children);
  }

  const timeline = el('div', { id: 'call' });
  main.append(section('Call', timeline));
  const end = call.finishedAt ? Date.parse(call.finishedAt) : Date.parse(call.requestedAt);
  renderTimeline(timeline, call, data.neighbours, end);

  for (const placement of data.placements) {
    const rows = [];
    for (const worker of placement.workers) {
      const head =
        worker.workerId +
        ' ' +
        worker.status +
        ' ' +
        worker.flavor +
        (worker.rank === null
          ? ''
          : ' rank ' + worker.rank + (worker.rank === 1 ? ' (chosen)' : '')) +
        ' key ' +
        worker.rankKey;
      if (worker.notCandidate !== null) {
        rows.push(
          el(
            'tr',
            { 'data-worker': worker.workerId },
            el('td', {}, head),
            el('td', {}, '-'),
            el('td', {}, 'not a candidate'),
            el('td', {}, worker.notCandidate),
          ),
        );
        continue;
      }
      worker.filters.forEach(function (filter, index) {
        rows.push(
          el(
            'tr',
            { 'data-worker': worker.workerId, class: 'verdict-' + filter.verdict },
            el('td', {}, index === 0 ? head : ''),
            el('td', {}, filter.filter),
            el('td', {}, filter.verdict),
            el('td', {}, filter.reason),
          ),
        );
      });
    }
    const table = el(
      'table',
      { class: 'placement' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          el('th', {}, 'worker'),
          el('th', {}, 'filter'),
          el('th', {}, 'verdict'),
          el('th', {}, 'reason'),
        ),
      ),
      el('tbody', {}, ...rows),
    );
    main.append(
      section(
        placement.title,
        el('p', { class: 'outcome' }, placement.outcome),
        placement.checkpoint ? el('p', {}, 'checkpoint: ' + placement.checkpoint) : null,
        table,
      ),
    );
  }

  const events = el(
    'table',
    { class: 'nearby' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', {}, 'seq'),
        el('th', {}, 'at'),
        el('th', {}, 'event'),
        el('th', {}, 'fields'),
      ),
    ),
    el(
      'tbody',
      {},
      ...data.nearby.map(function (event) {
        return el(
          'tr',
          {},
          el('td', {}, String(event.seq)),
          el('td', {}, event.at),
          el('td', {}, event.type),
          el('td', {}, event.text),
        );
      }),
    ),
  );
  main.append(section('What changed around it', events));
})();
