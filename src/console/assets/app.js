// The opledger console. It calls the node's v1 API — the same one `opledger ops` calls — with
// the session cookie and the X-Opledger-Console header, and builds every element from text
// (never from HTML), so nothing an operation carries can run as script.
'use strict';

const $ = (id) => document.getElementById(id);
const POLL_MS = 5000;
const me = { principal: null, roles: [] };
const etags = {};
let pollTimer = null;
// Each screen's render counts up; an answer for an older render is dropped, so the screen
// shown is always the one the address names.
let renders = 0;
// While a bulk action counts or runs, polling leaves the screen alone.
let busy = false;

// ---- small helpers --------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/// Replaces `node`'s children with those given, leaving out the absent (null, false).
function put(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function age(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  for (const [unit, size] of [['d', 86400000], ['h', 3600000], ['min', 60000], ['s', 1000]]) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  }
  return `${ms} ms`;
}

const counted = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;
const acts = () => me.roles.includes('operator');
const stateCell = (state) => el('td', { class: `state state-${state}`, text: state });
const opLink = (id) => el('a', { href: `#/operation/${encodeURIComponent(id)}`, text: id });

/// Calls the API. With `etagKey`, the answer's ETag is kept under that name and, when
/// `conditional`, sent back (If-None-Match) so that an unchanged answer is a bodiless 304.
async function api(method, path, body, etagKey, conditional = true) {
  const headers = { 'X-Opledger-Console': '1' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (etagKey && conditional && etags[etagKey]) headers['If-None-Match'] = etags[etagKey];
  let response;
  try {
    response = await fetch(path, {
      method, headers, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    return { status: 0, ok: false, data: { error: { message: `the node did not answer (${e.message})` } } };
  }
  let data = null;
  if (response.status !== 204 && response.status !== 304) {
    try { data = await response.json(); } catch { data = null; }
  }
  if (etagKey && response.ok && response.headers.get('ETag')) {
    etags[etagKey] = response.headers.get('ETag');
  }
  if (response.status === 401 && path !== '/ui/session') {
    signedOut((data && data.error && data.error.message) || 'Your session has ended: sign in again.');
  }
  return { status: response.status, ok: response.ok, data };
}

/// The API's own words for a refusal (`{"error": {"code", "message"}}`), or the status.
const failure = (r) => (r.data && r.data.error && r.data.error.message) || `the node answered ${r.status}`;
/// Whether an action was done, and if not why: a rejection for the operation's state (409,
/// 404) carries `rejection`, any other refusal `error`.
const done = (r) => r.ok && r.data && r.data.decision !== 'rejected';
const why = (r) => (r.data && r.data.rejection ? `${r.data.rejection.code}: ${r.data.rejection.message}` : failure(r));

/// Shows `node` as the screen of render `render`, unless another render started since.
function show(node, render) {
  if (render !== undefined && render !== renders) return;
  const view = $('view');
  view.replaceChildren(node);
  view.hidden = false;
}

function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : '';
}

// ---- signing in and out ---------------------------------------------------------------------

function signedOut(message) {
  clearInterval(pollTimer);
  pollTimer = null;
  busy = false;
  me.principal = null;
  me.roles = [];
  for (const id of ['nav', 'who', 'summary', 'charts', 'view']) $(id).hidden = true;
  for (const id of ['summary', 'charts', 'view', 'who-name']) $(id).replaceChildren();
  for (const key of Object.keys(etags)) delete etags[key];
  if ($('confirm').open) $('confirm').close();
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  $('token').focus();
}

function signedIn(who) {
  me.principal = who.principal;
  me.roles = who.roles;
  $('signin').hidden = true;
  $('who-name').textContent = `${who.principal} (${who.roles.join(', ')})`;
  for (const id of ['nav', 'who']) $(id).hidden = false;
  refreshHeader();
  route();
  pollTimer = setInterval(poll, POLL_MS);
}

async function signIn(event) {
  event.preventDefault();
  const token = $('token').value;
  $('token').value = '';
  const r = await api('POST', '/ui/session', { token });
  if (r.ok) signedIn(r.data);
  else $('signin-error').textContent = failure(r);
}

async function signOut() {
  await api('DELETE', '/ui/session');
  signedOut('Signed out.');
}

// ---- the header: counts by state and charts ------------------------------------------------

async function refreshHeader(force = true) {
  refreshCharts(force);
  const r = await api('GET', '/v1/summary', undefined, 'summary', !force);
  if (r.status === 304 || !r.ok) return;
  const section = $('summary');
  section.replaceChildren(
    el('span', { class: 'count' }, el('strong', { text: r.data.total }), 'operations'),
    ...Object.entries(r.data.by_state).map(([state, n]) =>
      el('a', { class: 'count', href: `#/operations${qs({ state })}` }, el('strong', { text: n }), state)),
  );
  section.hidden = false;
}

const SVG = 'http://www.w3.org/2000/svg';
const CHART_COLOURS = { execute: '#0b5cad', replay: '#1a6b32', conflict: '#a4161a', unknown: '#8a4b00', manual: '#6a1b9a', queue: '#1b1f24' };
const CHARTS_EVERY_MS = 30000;
let chartsAt = 0;

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/// A line chart of `series` ({name, values}) over `times`, inline SVG with its own summary for
/// screen readers and a legend.
function lineChart(title, series, times) {
  const [w, h, pad] = [560, 150, 28];
  const max = Math.max(1, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
  const x = (i) => pad + (times.length < 2 ? 0 : (i * (w - 2 * pad)) / (times.length - 1));
  const y = (v) => h - pad - (v * (h - 2 * pad)) / max;
  const lines = series.map((s) => {
    const points = s.values.map((v, i) => (v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
    const line = svg('polyline', { points: points.join(' '), fill: 'none', stroke: CHART_COLOURS[s.name], 'stroke-width': '2' });
    // The latest value as a dot, so that a chart of one minute shows something.
    const end = s.values.length - 1;
    const dot = s.values[end] === null ? null
      : svg('circle', { cx: x(end).toFixed(1), cy: y(s.values[end]).toFixed(1), r: '3', fill: CHART_COLOURS[s.name] });
    return dot ? svg('g', {}, line, dot) : line;
  });
  const last = series.map((s) => `${s.name} ${s.values[s.values.length - 1] ?? 'unknown'}`).join(', ');
  const label = `${title}: ${times.length} minutes from ${times[0]} to ${times[times.length - 1]}; highest ${max}; now ${last}.`;
  const chart = svg('svg', { viewBox: `0 0 ${w} ${h}`, role: 'img', 'aria-label': label },
    svg('line', { x1: pad, y1: h - pad, x2: w - pad, y2: h - pad, stroke: '#4f5862' }),
    svg('line', { x1: pad, y1: pad, x2: pad, y2: h - pad, stroke: '#4f5862' }),
    svg('text', { x: 2, y: pad + 4, 'font-size': '11', fill: '#1b1f24' }, max),
    svg('text', { x: 2, y: h - pad + 4, 'font-size': '11', fill: '#1b1f24' }, 0),
    svg('text', { x: pad, y: h - 8, 'font-size': '11', fill: '#1b1f24' }, (times[0] || '').slice(11, 16)),
    svg('text', { x: w - pad, y: h - 8, 'font-size': '11', fill: '#1b1f24', 'text-anchor': 'end' }, 'now'),
    ...lines);
  return el('figure', { class: 'chart' }, el('h2', { text: title }), chart,
    el('ul', { class: 'legend' }, series.map((s) => {
      const swatch = el('span', { class: 'swatch', 'aria-hidden': 'true' });
      swatch.style.background = CHART_COLOURS[s.name];
      return el('li', {}, swatch, s.name);
    })));
}

async function refreshCharts(force) {
  if (!force && Date.now() - chartsAt < CHARTS_EVERY_MS) return;
  chartsAt = Date.now();
  const r = await api('GET', '/v1/summary/history');
  if (!r.ok) return;
  const samples = r.data.samples;
  const times = samples.map((s) => s.at);
  const section = $('charts');
  section.replaceChildren(
    lineChart('Decisions per minute (this node)', r.data.kinds.map((name) => ({ name, values: samples.map((s) => s[name]) })), times),
    lineChart('Operations waiting for a person', [{ name: 'queue', values: samples.map((s) => s.queue) }], times));
  section.hidden = false;
}

// ---- the queue ------------------------------------------------------------------------------

let queueFilter = { tool: '', older: '' };

function queueMatches(item) {
  const minutes = Number(queueFilter.older || 0);
  return (!queueFilter.tool || item.target.tool === queueFilter.tool)
    && (Date.now() - Date.parse(item.requested_at)) / 60000 >= minutes;
}

async function renderQueue(force) {
  const render = force ? ++renders : renders;
  const r = await api('GET', '/v1/reconciliation', undefined, 'queue', !force);
  if (r.status === 304) return;
  if (!r.ok) {
    delete etags.queue; // so that the next poll shows the queue again, not nothing
    return show(el('p', { class: 'error', text: failure(r) }), render);
  }
  const items = r.data.items;
  const tools = [...new Set(items.map((i) => i.target.tool))].sort();
  const shown = items.filter(queueMatches);
  const toolSelect = el('select', { id: 'queue-tool', onchange: (e) => { queueFilter.tool = e.target.value; renderQueue(true); } },
    el('option', { value: '', text: 'every tool' }),
    tools.map((t) => el('option', { value: t, text: t, selected: t === queueFilter.tool })));
  const older = el('input', { id: 'queue-older', type: 'number', min: '0', value: queueFilter.older, onchange: (e) => { queueFilter.older = e.target.value; renderQueue(true); } });
  const rows = shown.map((i) => el('tr', {},
    el('td', { class: 'id' }, opLink(i.operation_id)),
    el('td', { text: i.target.tool }),
    el('td', { text: i.target.principal }),
    stateCell(i.state),
    el('td', { text: age(i.requested_at), title: i.requested_at }),
    el('td', { text: i.taken_over_by || '—' }),
    el('td', { text: i.recovery ? `${i.recovery.queries} quer${i.recovery.queries === 1 ? 'y' : 'ies'}, last: ${i.recovery.last_result || '—'}` : '—' })));
  show(el('div', {},
    el('h1', { text: `Reconciliation queue: ${counted(r.data.total, 'operation')} waiting for a person` }),
    el('p', { class: 'muted', text: 'Nobody can settle these automatically. Open one to see its guidance and timeline, then take it over and resolve it.' }),
    el('div', { class: 'filters' },
      el('div', {}, el('label', { for: 'queue-tool', text: 'Tool' }), toolSelect),
      el('div', {}, el('label', { for: 'queue-older', text: 'Waiting at least (minutes)' }), older)),
    shown.length === 0 ? el('p', { text: items.length ? 'No item matches these filters.' : 'The queue is empty.' })
      : el('table', {}, el('caption', { class: 'visually-hidden', text: 'Operations waiting for a person' }),
        el('thead', {}, el('tr', {}, ['Operation', 'Tool', 'Principal', 'State', 'Waiting', 'Taken over by', 'Recovery'].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows)),
    acts() && shown.length ? bulkPanel(`the ${counted(shown.length, 'queued operation')} shown`,
      async () => shown.map((i) => ({ operation_id: i.operation_id, version: i.version, state: i.state }))) : null), render);
}

// ---- the operations list --------------------------------------------------------------------

const LIST_FIELDS = ['state', 'tool', 'principal', 'since', 'until'];

async function renderOperations(params) {
  const render = ++renders;
  const filter = Object.fromEntries(LIST_FIELDS.map((k) => [k, params.get(k) || '']));
  const cursor = params.get('cursor') || '';
  const r = await api('GET', `/v1/operations${qs({ ...filter, cursor, limit: '50' })}`);
  const form = el('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const values = Object.fromEntries(LIST_FIELDS.map((k) => [k, $(`list-${k}`).value.trim()]));
    location.hash = `#/operations${qs(values)}`;
  } },
  LIST_FIELDS.map((k) => el('div', {}, el('label', { for: `list-${k}`, text: k }),
    el('input', { id: `list-${k}`, value: filter[k], placeholder: k === 'since' || k === 'until' ? '2026-12-07T10:00:00Z' : '' }))),
  el('button', { type: 'submit', class: 'primary', text: 'Filter' }));
  if (!r.ok) return show(el('div', {}, el('h1', { text: 'Operations' }), form, el('p', { class: 'error', text: failure(r) })), render);
  const rows = r.data.items.map((o) => el('tr', {},
    el('td', { class: 'id' }, opLink(o.operation_id)),
    el('td', { text: o.tool }),
    el('td', { text: o.principal }),
    stateCell(o.state),
    el('td', { text: o.created_at }),
    el('td', { text: o.updated_at })));
  const next = r.data.next_cursor
    ? el('a', { href: `#/operations${qs({ ...filter, cursor: r.data.next_cursor })}`, text: 'Next page' }) : null;
  show(el('div', {},
    el('h1', { text: 'Operations, newest first' }),
    form,
    r.data.count === 0 ? el('p', { text: 'No operation matches.' })
      : el('table', {}, el('caption', { class: 'visually-hidden', text: 'Operations' }),
        el('thead', {}, el('tr', {}, ['Operation', 'Tool', 'Principal', 'State', 'Created', 'Last change'].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows)),
    el('p', {}, cursor ? el('a', { href: `#/operations${qs(filter)}`, text: 'First page' }) : null, cursor && next ? ' · ' : null, next),
    acts() && r.data.count ? bulkPanel('every operation matching this filter (all pages)', () => everyMatching(filter)) : null), render);
}

/// Every operation matching a list filter, page after page.
async function everyMatching(filter) {
  const all = [];
  let cursor = '';
  for (;;) {
    const r = await api('GET', `/v1/operations${qs({ ...filter, cursor, limit: '500' })}`);
    if (!r.ok) throw new Error(failure(r));
    all.push(...r.data.items.map((o) => ({ operation_id: o.operation_id, version: o.version, state: o.state })));
    if (!r.data.next_cursor) return all;
    cursor = r.data.next_cursor;
  }
}

// ---- one operation --------------------------------------------------------------------------

function fields(pairs) {
  return el('dl', { class: 'fields' }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]));
}

/// Who acted in an event: an operator, an executor or a recoverer, whichever it names.
function actor(f) {
  const by = f.by || {};
  return f.operator || by.operator || f.holder || by.holder || f.recoverer || (f.claim && f.claim.holder);
}

function timelineEntry(e) {
  const f = e.event || {};
  const reason = f.reason || (f.by && f.by.reason);
  // The event's other fields, one a line, leaving out what is empty or shown above.
  const rest = Object.entries(f).filter(([k, v]) => v !== null && v !== undefined && k !== 'reason')
    .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('\n');
  const who = actor(f);
  const what = e.type === 'moved_to_manual'
    ? `moved to manual — ${e.reason}: ${e.explanation}`
    : `${e.type || 'unreadable event'} → ${e.decision}${who ? ` · by ${who}` : ''}`;
  return el('li', {},
    el('div', { class: 'what', text: what }),
    el('div', { class: 'muted', text: `${e.at} · offset ${e.offset}${e.schema_version ? ` · schema v${e.schema_version}` : ''}` }),
    reason ? el('p', { class: 'reason', text: `Reason: ${reason}` }) : null,
    e.error ? el('p', { class: 'error', text: e.error }) : null,
    rest ? el('pre', { text: rest }) : null);
}

async function renderOperation(id) {
  const render = ++renders;
  const path = `/v1/operations/${encodeURIComponent(id)}`;
  const [op, history, queue] = await Promise.all([
    api('GET', path), api('GET', `${path}/history`), api('GET', '/v1/reconciliation')]);
  if (!op.ok) return show(el('p', { class: 'error', text: failure(op) }), render);
  const o = op.data;
  const queued = queue.ok ? queue.data.items.find((i) => i.operation_id === o.operation_id) : undefined;
  const result = o.result ? `${o.result.resource_ref} (status ${o.result.status})` : undefined;
  const recovery = o.recovery ? JSON.stringify(o.recovery) : undefined;
  show(el('div', {},
    el('h1', { text: `Operation ${o.operation_id}` }),
    fields([['State', el('span', { class: `state state-${o.state}`, text: o.state })], ['Version', o.version],
      ['Tool', o.tool], ['Principal', o.principal], ['Holder', o.holder], ['Requested', o.created_at],
      ['Last change', o.updated_at], ['Lease', o.lease ? `${o.lease.holder} until ${o.lease.expires_at}` : undefined],
      ['Taken over by', o.taken_over_by], ['Result', result], ['Recovery', recovery], ['Parent', o.parent], ['Compensates', o.compensates]]),
    queued ? [el('h2', { text: 'Guidance' }), el('p', { class: 'guidance', text: queued.guidance })] : null,
    acts() ? actionsFor(o, path) : null,
    el('h2', { text: 'Timeline' }),
    history.ok ? el('ol', { class: 'timeline' }, history.data.events.map(timelineEntry))
      : el('p', { class: 'error', text: failure(history) })), render);
}

const summaryOf = (o) => `${o.operation_id} (tool ${o.tool}, principal ${o.principal}, ${o.state}, version ${o.version})`;

function actionsFor(o, path) {
  const status = el('p', { role: 'status' });
  const after = (r) => {
    if (done(r)) { route(); refreshHeader(); return; }
    status.className = 'error';
    status.textContent = `Not done: ${why(r)}`;
  };
  const takeOver = async () => {
    const reason = await confirmAction(`Take over ${summaryOf(o)}: from then on executors' reports are refused, claims answer \`manual\`, and only an operator can resolve it.`);
    if (reason !== null) after(await api('POST', `${path}/takeover`, withReason({ expected_version: o.version }, reason)));
  };
  const resolve = async () => {
    const choice = el('select', { id: 'resolve-outcome' },
      el('option', { value: 'completed', text: 'completed: I found the effect' }),
      el('option', { value: 'not_executed', text: 'not executed: it surely did not happen' }));
    const ref = el('input', { id: 'resolve-ref' });
    const code = el('input', { id: 'resolve-status', type: 'number', min: '100', max: '599', value: '200' });
    const extra = [el('label', { for: 'resolve-outcome', text: 'Outcome' }), choice,
      el('label', { for: 'resolve-ref', text: 'Resource reference found (for completed)' }), ref,
      el('label', { for: 'resolve-status', text: 'Status (for completed)' }), code];
    const effect = () => (choice.value === 'completed'
      ? `as completed (resource ${ref.value}, status ${code.value}): it is settled for good and every claim of its key replays that result`
      : 'as not executed: its key is released, and the next claim executes it again — say so only if the side effect surely did not happen');
    const reason = await confirmAction(() => `Resolve ${summaryOf(o)} ${effect()}.`, extra);
    if (reason === null) return;
    const body = choice.value === 'completed'
      ? { outcome: 'completed', result: { resource_ref: ref.value, status: Number(code.value) } }
      : { outcome: 'not_executed' };
    body.expected_version = o.version;
    after(await api('POST', `${path}/resolve`, withReason(body, reason)));
  };
  // What the ledger would accept now: a takeover of what is not settled nor yet taken over, a
  // resolution of what was taken over (the API decides). Compensating is an agent's act, with
  // its own token: the console never acts as an agent.
  const open = ['processing', 'outcome_unknown', 'manual'].includes(o.state);
  return el('div', {},
    el('h2', { text: 'Actions' }),
    el('div', { class: 'actions' },
      open && !o.taken_over_by ? el('button', { type: 'button', class: 'primary', onclick: takeOver, text: 'Take over' }) : null,
      o.state === 'manual' && o.taken_over_by ? el('button', { type: 'button', class: 'primary', onclick: resolve, text: 'Resolve…' }) : null,
      open ? null : el('p', { class: 'muted', text: `Nothing to do here: it is ${o.state}.` })),
    status);
}

function withReason(body, reason) {
  if (reason) body.reason = reason;
  return body;
}

// ---- confirmation ---------------------------------------------------------------------------

const REASON_BYTES_MAX = 500;

/// What is wrong with a reason as the ledger would judge it (at most 500 bytes of UTF-8, no
/// control characters), or null.
function reasonProblem(reason) {
  if (new TextEncoder().encode(reason).length > REASON_BYTES_MAX) return `A reason holds at most ${REASON_BYTES_MAX} bytes: shorten it.`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(reason)) return 'A reason is one line of text.';
  return null;
}

/// Shows what will happen and asks; resolves to the reason typed ('' for none), or null if the
/// operator cancelled. `statement` may be a function, re-read as the extra fields change.
function confirmAction(statement, extra = []) {
  const dialog = $('confirm');
  const text = () => (typeof statement === 'function' ? statement() : statement);
  $('confirm-text').textContent = text();
  $('confirm-error').textContent = '';
  $('confirm-fields').replaceChildren(...extra);
  for (const f of extra) f.addEventListener('input', () => { $('confirm-text').textContent = text(); });
  $('confirm-reason').value = '';
  return new Promise((resolve) => {
    const finish = (value) => {
      dialog.close();
      $('confirm-form').onsubmit = null;
      $('confirm-cancel').onclick = null;
      dialog.oncancel = null;
      resolve(value);
    };
    $('confirm-form').onsubmit = (e) => {
      e.preventDefault();
      const reason = $('confirm-reason').value.trim();
      const problem = reasonProblem(reason);
      if (problem) $('confirm-error').textContent = problem;
      else finish(reason);
    };
    $('confirm-cancel').onclick = () => finish(null);
    dialog.oncancel = () => finish(null);
    dialog.showModal();
  });
}

// ---- bulk actions by selector ---------------------------------------------------------------

/// An action on every operation a selector matches: a dry run says how many and which first,
/// then each is acted on in turn with the version the dry run saw; the outcome of each is listed.
function bulkPanel(what, select) {
  const out = el('div', { role: 'status' });
  const action = el('select', { id: 'bulk-action' },
    el('option', { value: 'takeover', text: 'take over' }),
    el('option', { value: 'not_executed', text: 'resolve as not executed' }));
  const dryRun = async () => {
    out.replaceChildren(el('p', { text: 'Counting…' }));
    let matched;
    busy = true;
    try { matched = await select(); } catch (e) { out.replaceChildren(el('p', { class: 'error', text: e.message })); return; } finally { busy = false; }
    const verb = action.value === 'takeover' ? 'take over' : 'resolve as not executed';
    put(out,
      el('p', { text: `Dry run: ${counted(matched.length, 'operation')} match${matched.length === 1 ? 'es' : ''}; nothing was changed.` }),
      el('ul', {}, matched.slice(0, 20).map((m) => el('li', { class: 'id' }, opLink(m.operation_id), ` (${m.state})`))),
      matched.length > 20 ? el('p', { class: 'muted', text: `… and ${matched.length - 20} more.` }) : null,
      matched.length ? el('button', { type: 'button', class: 'danger', text: `${verb}: ${counted(matched.length, 'operation')}…`, onclick: () => runBulk(action.value, matched, out) }) : null);
  };
  return el('div', { class: 'bulk' },
    el('h2', { text: 'Act on many' }),
    el('p', { text: `Acts on ${what}, one by one, with the version each had when counted.` }),
    el('label', { for: 'bulk-action', text: 'Action' }), action, ' ',
    el('button', { type: 'button', onclick: dryRun, text: 'Dry run' }),
    out);
}

async function runBulk(action, matched, out) {
  const effect = action === 'takeover'
    ? 'take over: executors\' reports are then refused and only an operator can resolve them'
    : 'resolve as not executed: their keys are released and the next claim of each executes it again — only if none of these side effects happened';
  const reason = await confirmAction(`For ${counted(matched.length, 'operation')}: ${effect}.`);
  if (reason === null) return;
  const succeeded = [];
  const failed = [];
  let stopped = null;
  const progress = el('p', { text: `0 of ${matched.length} done` });
  out.replaceChildren(progress);
  busy = true;
  try {
    for (const m of matched) {
      const path = `/v1/operations/${encodeURIComponent(m.operation_id)}/${action === 'takeover' ? 'takeover' : 'resolve'}`;
      const body = action === 'takeover' ? { expected_version: m.version } : { outcome: 'not_executed', expected_version: m.version };
      const r = await api('POST', path, withReason(body, reason));
      // A refusal of the caller (signed out, no longer an operator, no node) ends the run: the
      // rest would be refused alike.
      if ([0, 401, 403].includes(r.status)) { stopped = why(r); break; }
      if (done(r)) succeeded.push(m);
      else failed.push({ ...m, why: why(r) });
      progress.textContent = `${succeeded.length + failed.length} of ${matched.length} done`;
    }
  } finally {
    busy = false;
  }
  const untried = matched.length - succeeded.length - failed.length;
  put(out,
    el('p', { class: failed.length || stopped ? 'error' : 'ok', text: `${succeeded.length} succeeded, ${failed.length} failed${untried ? `, ${untried} not tried` : ''}.` }),
    stopped ? el('p', { class: 'error', text: `Stopped: ${stopped}` }) : null,
    failed.length ? el('ul', {}, failed.map((f) => el('li', {}, opLink(f.operation_id), `: ${f.why}`))) : null,
    succeeded.length ? el('details', {}, el('summary', { text: 'Succeeded' }), el('ul', {}, succeeded.map((s) => el('li', {}, opLink(s.operation_id))))) : null);
  refreshHeader();
}

// ---- tools ----------------------------------------------------------------------------------

async function renderTools() {
  const render = ++renders;
  const r = await api('GET', '/v1/tools');
  if (!r.ok) return show(el('p', { class: 'error', text: failure(r) }), render);
  const rows = r.data.items.map((t) => el('tr', {},
    el('td', { text: t.name }), el('td', { text: t.class }), el('td', { text: t.loss }),
    el('td', { text: duration(t.lease_ms) }), el('td', { text: duration(t.retention_ms) }), el('td', { text: t.queryable ? 'yes' : 'no' }),
    el('td', { text: t.unknown_outcome }), el('td', { text: (t.fingerprint_categories || []).join(', ') })));
  show(el('div', {}, el('h1', { text: 'Tools and their contracts' }),
    el('table', {}, el('caption', { class: 'visually-hidden', text: 'Tools' }),
      el('thead', {}, el('tr', {}, ['Tool', 'Class', 'Loss', 'Lease', 'Retention', 'Queryable', 'An unknown outcome', 'Fingerprint'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows))), render);
}

// ---- routing and polling --------------------------------------------------------------------

function route() {
  const hash = location.hash || '#/queue';
  const [path, query] = hash.slice(1).split('?');
  for (const a of document.querySelectorAll('nav a')) {
    if (path.startsWith(a.getAttribute('href').slice(1))) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (path.startsWith('/operation/')) return renderOperation(decodeURIComponent(path.slice('/operation/'.length)));
  if (path === '/operations') return renderOperations(new URLSearchParams(query || ''));
  if (path === '/tools') return renderTools();
  return renderQueue(true);
}

function poll() {
  if ($('confirm').open || document.hidden || busy) return;
  refreshHeader(false);
  const path = (location.hash || '#/queue').slice(1);
  if (path === '/queue') renderQueue(false);
}

document.addEventListener('DOMContentLoaded', async () => {
  $('signin-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  window.addEventListener('hashchange', () => {
    // A dialog belongs to the screen it was opened on.
    if ($('confirm').open) $('confirm-cancel').click();
    if (me.principal) route();
  });
  const r = await api('GET', '/ui/session');
  if (r.ok) signedIn(r.data);
  else signedOut('');
});
