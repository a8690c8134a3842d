/* herald console (docs/console.md): plain JavaScript, no framework, no build
 * step.  Pages are views of index.html chosen by the URL's hash (#/,
 * #/task/ID, #/new, #/audit, #/hooks, #/series, #/series/ID).  Every data call goes to this dispatcher's
 * /v1 API with the token the operator typed in, kept in sessionStorage
 * (this tab only), and says X-Herald-Client: console (the audit log's
 * "via").  GET /v1/me tells which routes the token's role may call: a
 * control whose route is not among them is not shown.  Data is put into
 * the page with textContent, never as HTML. */
'use strict';

(function () {
  const TOKEN_KEY = 'herald.token';
  const LIST_POLL_MS = 2000;
  const TASK_POLL_MS = 1000;
  const CHUNKS_POLL_MS = 2000;
  const STATS_POLL_MS = 5000;
  const HOOKS_POLL_MS = 2000;
  const SERIES_POLL_MS = 2000;
  const SERIES_NEXT = 10;  /* next occurrences shown (GET /v1/series/{id}/next?count=) */
  const SERIES_TASKS = 20; /* occurrences written shown, newest first */
  const FUNNEL = ['sent', 'delivered', 'opened', 'clicked'];
  const SERIES = ['sent', 'failed', 'opened', 'clicked'];
  const SERIES_DOTS = 120;
  const CHART_SAMPLES = 600; /* ten minutes at one a second */
  const RATE_WINDOW_MS = 10000;
  const UPLOAD_BATCH = 10000; /* the API's max_ids default; halved if the server's is lower */
  const DL_PAGE = 50;
  const UID_MAX = 9223372036854775807n;
  const FINISHED = ['done', 'cancelled', 'failed'];
  const OUTCOMES = ['sent', 'failed', 'throttled', 'pulled', 'cancelled', 'unregistered',
    'expired', 'opted_out', 'suppressed', 'unaccounted'];

  const AUDIT_PAGE = 50;

  const $ = (id) => document.getElementById(id);
  const views = ['view-login', 'view-list', 'view-task', 'view-new', 'view-audit', 'view-hooks',
    'view-series', 'view-one-series'];
  /* The caller (GET /v1/me): name, role and the routes it may call. */
  let me = null;
  /* Each route change bumps the generation: a timer or an answer of an
   * older page sees it and stops, so no page updates another's view. */
  let generation = 0;
  let timers = [];

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  async function api(method, path, body) {
    const headers = { 'X-Herald-Client': 'console' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    // Every POST says JSON, a body or not: the dispatcher answers 415 to
    // one that does not (a cross-site form could send that).
    if (body !== undefined || method === 'POST') headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {
        method, headers, cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'network', 'the dispatcher did not answer (' + e.message + ')');
    }
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch (e) {
      json = null;
    }
    if (!res.ok) {
      const err = json && json.error ? json.error
        : { code: 'http_' + res.status, message: text.slice(0, 300) };
      if (res.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        me = null;
        setTimeout(route, 0);
      }
      throw new ApiError(res.status, err.code, err.message);
    }
    return json;
  }

  function showError(e) {
    const what = e instanceof ApiError
      ? (e.status ? e.status + ' ' : '') + e.code + ': ' + e.message : String(e);
    $('alert').textContent = what;
  }

  function clearError() {
    $('alert').textContent = '';
  }

  function fmt(n) {
    return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US');
  }

  function fmtSecs(s) {
    if (s === null || s === undefined || !isFinite(s)) return '–';
    s = Math.round(s);
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells) tr.appendChild(c instanceof Node ? wrapTd(c) : el('td', c));
    return tr;
  }

  function wrapTd(node) {
    if (node.tagName === 'TD' || node.tagName === 'TH') return node;
    const td = document.createElement('td');
    td.appendChild(node);
    return td;
  }

  /* Calls FN now and every MS while the page that asked is shown. */
  function poll(fn, ms) {
    const gen = generation;
    const tick = async () => {
      if (gen !== generation) return;
      if (!document.hidden) {
        try {
          await fn(gen);
        } catch (e) {
          if (gen === generation) showError(e);
        }
      }
      if (gen === generation) timers.push(setTimeout(tick, ms));
    };
    tick();
  }

  /* Whether the caller may call ROUTE ("POST /v1/tasks/{id}/pause"). */
  function can(route) {
    return me !== null && me.routes.includes(route);
  }

  /* Shows each element marked data-route only to a caller who may call
   * that route. */
  function applyRole() {
    for (const e of document.querySelectorAll('[data-route]')) e.hidden = !can(e.dataset.route);
    $('whoami').textContent = me === null ? '' : me.name + ' (' + me.role + ')';
  }

  function show(view) {
    for (const v of views) $(v).hidden = v !== view;
    $('logout').hidden = token() === null;
    applyRole();
  }

  function doneOf(c) {
    return (c.sent || 0) + (c.failed || 0) + (c.throttled || 0) + (c.pulled || 0) +
      (c.cancelled || 0) + (c.unregistered || 0) + (c.expired || 0) + (c.opted_out || 0) +
      (c.suppressed || 0);
  }

  /* ---- login ------------------------------------------------------------ */

  function showLogin() {
    show('view-login');
    $('login-token').focus();
  }

  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('login-token').value);
    $('login-token').value = '';
    try {
      me = await api('GET', '/v1/me');
      clearError();
      route();
    } catch (e) {
      showError(e);
      if (e.status === 401) sessionStorage.removeItem(TOKEN_KEY);
    }
  });

  $('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    me = null;
    location.hash = '#/';
    route();
  });

  /* ---- task list ----------------------------------------------------------- */

  /* The list's filter and page come from the hash (#/?q=&state=&limit=&before=)
   * so a page can be bookmarked and Back works; `newer` keeps the `before`
   * of the pages seen on the way down, for the Newer button. */
  let newer = [];
  const samples = new Map(); /* task id -> [{t, done}] for the rate */

  function listParams() {
    const q = location.hash.indexOf('?');
    return new URLSearchParams(q < 0 ? '' : location.hash.slice(q + 1));
  }

  function goList(p) {
    location.hash = '#/?' + p.toString();
  }

  function rateOf(id, done, now) {
    let s = samples.get(id);
    if (!s) samples.set(id, (s = []));
    s.push({ t: now, done });
    while (s.length > 2 && now - s[0].t > RATE_WINDOW_MS) s.shift();
    if (s.length < 2 || s[s.length - 1].t === s[0].t) return null;
    return (s[s.length - 1].done - s[0].done) * 1000 / (s[s.length - 1].t - s[0].t);
  }

  function showList() {
    show('view-list');
    const p = listParams();
    $('f-q').value = p.get('q') || '';
    $('f-state').value = p.get('state') || '';
    const limit = p.get('limit') || '50';
    if (!Array.from($('f-limit').options, (o) => o.value).includes(limit))
      $('f-limit').add(new Option(limit));
    $('f-limit').value = limit;
    if (!p.get('before')) newer = [];
    $('list-newer').disabled = newer.length === 0;
    $('list-newest').disabled = !p.get('before');
    poll(async (gen) => {
      const q = new URLSearchParams();
      for (const k of ['q', 'state', 'limit', 'before']) if (p.get(k)) q.set(k, p.get(k));
      if (!q.get('limit')) q.set('limit', '50');
      const j = await api('GET', '/v1/tasks?' + q.toString());
      if (gen !== generation) return;
      renderList(j, p);
    }, LIST_POLL_MS);
  }

  function renderList(j, p) {
    const now = Date.now();
    const body = $('list-table').tBodies[0];
    const rows = [];
    for (const t of j.tasks) {
      const c = t.counters || {};
      const done = doneOf(c);
      const total = c.total || 0;
      const running = !FINISHED.includes(t.state) && t.state !== 'scheduled';
      const rate = running ? rateOf(t.id, done, now) : null;
      const bar = el('progress');
      bar.max = Math.max(total, 1);
      bar.value = total > 0 ? Math.min(done, total) : (t.state === 'done' ? 1 : 0);
      bar.setAttribute('aria-label', 'Progress of task ' + t.id);
      const link = el('a', t.name);
      link.href = '#/task/' + t.id;
      const state = el('td', t.state, 'state state-' + t.state);
      const tr = row([el('td', t.id, 'num'), link, state, bar,
        el('td', fmt(done) + ' / ' + fmt(total), 'num'),
        el('td', rate === null ? '–' : fmt(Math.round(rate)) + '/s', 'num'),
        el('td', rate > 0 && total > done ? fmtSecs((total - done) / rate) : '–'),
        el('td', t.due_at)]);
      tr.dataset.task = t.id;
      tr.dataset.state = t.state;
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    /* Rates only for the rows shown: paging through 10,000 tasks keeps no more. */
    const shown = new Set(j.tasks.map((t) => t.id));
    for (const id of samples.keys()) if (!shown.has(id)) samples.delete(id);
    $('list-status').textContent = j.tasks.length === 0 ? 'No task matches.'
      : j.tasks.length + ' task(s) shown' + (j.next === null ? '; no older ones.' : '.');
    const older = $('list-older');
    older.disabled = j.next === null || j.next === undefined;
    older.dataset.next = older.disabled ? '' : String(j.next);
    clearError();
  }

  $('list-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    if ($('f-q').value) p.set('q', $('f-q').value);
    if ($('f-state').value) p.set('state', $('f-state').value);
    p.set('limit', $('f-limit').value);
    newer = [];
    goList(p);
  });

  $('list-older').addEventListener('click', () => {
    const p = listParams();
    newer.push(p.get('before') || '');
    p.set('before', $('list-older').dataset.next);
    goList(p);
  });

  $('list-newer').addEventListener('click', () => {
    const p = listParams();
    const b = newer.pop();
    if (b) p.set('before', b);
    else p.delete('before');
    goList(p);
  });

  $('list-newest').addEventListener('click', () => {
    const p = listParams();
    p.delete('before');
    newer = [];
    goList(p);
  });

  /* ---- task page ------------------------------------------------------------- */

  let task = null; /* the shown task's last GET */
  let chart = [];  /* [{t, done, sent, failed}] since the page opened */
  let dlCursor = null;

  function showTask(id) {
    show('view-task');
    task = null;
    chart = [];
    $('task-h').textContent = 'Task ' + id;
    for (const m of ['task-msg', 'dl-msg', 'subs-msg', 'chunks-summary']) $(m).textContent = '';
    $('task-counters').tBodies[0].replaceChildren();
    $('task-variants').tBodies[0].replaceChildren();
    $('task-variants').hidden = true;
    $('task-ab').hidden = true;
    $('chunks-table').tBodies[0].replaceChildren();
    $('task-chart').replaceChildren();
    $('subs-progress').value = 0;
    $('btn-cancel-confirm').hidden = true;
    poll(async (gen) => {
      const t = await api('GET', '/v1/tasks/' + id);
      if (gen !== generation) return;
      renderTask(t);
      clearError();
    }, TASK_POLL_MS);
    poll(async (gen) => {
      const j = await api('GET', '/v1/tasks/' + id + '/chunks');
      if (gen !== generation) return;
      renderChunks(j);
    }, CHUNKS_POLL_MS);
    $('funnel-table').tBodies[0].replaceChildren();
    $('funnel-chart').replaceChildren();
    $('series-chart').replaceChildren();
    poll(async (gen) => {
      const j = await api('GET', '/v1/tasks/' + id + '/stats');
      if (gen !== generation) return;
      renderStats(j);
    }, STATS_POLL_MS);
    loadDeadLetters(id, false).catch(showError);
  }

  function renderTask(t) {
    task = t;
    const p = t.progress || {};
    const o = p.outcomes || {};
    $('task-h').textContent = 'Task ' + t.id + ': ' + t.name;
    const st = $('task-state');
    st.textContent = t.state;
    st.className = 'state state-' + t.state;
    $('task-control').textContent = t.control && t.control !== 'run'
      ? '(control: ' + t.control + ')' : '';
    const bar = $('task-progress');
    bar.max = Math.max(p.total || 0, 1);
    bar.value = Math.min(p.done || 0, p.total || 0);
    $('task-progress-text').textContent = fmt(p.done) + ' of ' + fmt(p.total) + ' (' +
      Math.floor((p.ratio || 0) * 100) + ' %), ETA ' + fmtSecs(p.eta_s);
    const rows = OUTCOMES.map((k) => {
      const tr = row([el('th', k), el('td', fmt(o[k]), 'num')]);
      tr.firstChild.scope = 'row';
      tr.dataset.outcome = k;
      return tr;
    });
    rows.push(row([el('th', 'retried (attempts)'), el('td', fmt(p.retried), 'num')]));
    $('task-counters').tBodies[0].replaceChildren(...rows);
    const finished = FINISHED.includes(t.state);
    $('btn-pause').disabled = finished || t.state === 'paused' || t.control === 'pause';
    $('btn-resume').disabled = finished || (t.state !== 'paused' && t.control !== 'pause');
    $('btn-cancel').disabled = finished;
    if (finished) $('btn-cancel-confirm').hidden = true;
    $('subs-section').hidden = t.state !== 'scheduled' ||
      !can('POST /v1/tasks/{id}/subscribers');
    renderDetails(t);
    renderVariants(t);
    /* A finish_by task's plan (progress.plan) is drawn against done. */
    const planned = p.plan ? p.plan.planned_done_now : null;
    chart.push({ t: Date.now(), done: p.done || 0, sent: o.sent || 0, failed: o.failed || 0,
      planned: planned });
    if (chart.length > CHART_SAMPLES) chart.shift();
    renderChart(p.total || 0);
  }

  /* The members KEYS of O that are set, as the terms of the dl ID (an
   * object as JSON text; local_time only when true). */
  function renderDl(id, o, keys) {
    const items = [];
    for (const k of keys) {
      if (k === 'local_time' && o[k] === false) continue;
      if (o[k] === null || o[k] === undefined || o[k] === '') continue;
      items.push(el('dt', k), el('dd', typeof o[k] === 'object' ? JSON.stringify(o[k]) : o[k]));
    }
    $(id).replaceChildren(...items);
  }

  function renderDetails(t) {
    renderDl('task-details', t, ['channel', 'category', 'topic', 'due_at', 'freeze_at',
      'finish_by', 'expire_at', 'event_at', 'last_warning', 'local_time',
      'default_tz', 'window_start', 'window_end', 'window_tz', 'rate_limit', 'chunk_size',
      'title', 'body', 'last_error', 'claimed_by', 'payload']);
  }

  /* The task's variants (GET /v1/tasks/{id}: variants, variant_counts), the
   * task's own content first as "default"; blank title or body: the
   * task's.  Hidden for a task without variants. */
  function renderVariants(t) {
    const vs = t.variants || [];
    const counts = t.variant_counts || {};
    $('task-variants').hidden = vs.length === 0;
    const all = [{ key: 'default', title: t.title, body: t.body }].concat(vs.map((v) => ({
      key: v.name !== undefined ? v.name + ' (' + v.split + ' %)' : v.locale,
      id: v.name !== undefined ? v.name : v.locale, title: v.title, body: v.body,
    })));
    const rows = vs.length === 0 ? [] : all.map((v) => {
      const c = counts[v.id || v.key] || {};
      const tr = row([el('th', v.key), v.title || '', v.body || '',
        el('td', fmt(c.sent || 0), 'num'), el('td', fmt(c.failed || 0), 'num'),
        el('td', fmt(c.unregistered || 0), 'num'), el('td', fmt(c.pulled || 0), 'num'),
        el('td', fmt(c.opened || 0), 'num'), el('td', fmt(c.clicked || 0), 'num')]);
      tr.firstChild.scope = 'row';
      tr.dataset.variant = v.id || v.key;
      return tr;
    });
    $('task-variants').tBodies[0].replaceChildren(...rows);
    renderAb(t.ab);
  }

  /* An A/B test's winner step (GET /v1/tasks/{id}: ab, docs/api.md "Test
   * then winner"): its phase, when the pick is due, and the winner with the
   * per-arm rates the pick read. */
  function renderAb(ab) {
    $('task-ab').hidden = !ab;
    if (!ab) return;
    let text = 'A/B test then winner: sample ' + ab.sample_pct + ' %, metric ' + ab.metric +
      ', phase ' + ab.phase;
    if (ab.phase === 'waiting') text += ' until ' + ab.decide_at;
    if (ab.winner) {
      const arms = (ab.figures && ab.figures.arms) || {};
      text += '; winner ' + ab.winner + ' by ' + ab.metric + ' (' + Object.entries(arms)
        .map(([k, f]) => k + ' ' + (100 * f.rate).toFixed(1) + ' % of ' + fmt(f.sent))
        .join(', ') + ')';
    }
    $('task-ab').textContent = text;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* Done, sent and failed against time, scaled to the task's total (or to
   * the largest value seen while the total is 0). */
  function renderChart(total) {
    const W = 600, H = 160, L = 50, R = 10, T = 10, B = 20;
    const s = chart;
    const top = Math.max(total, ...s.map((x) => x.done), 1);
    const t0 = s[0].t, t1 = Math.max(s[s.length - 1].t, t0 + 1);
    const x = (t) => (L + (W - L - R) * (t - t0) / (t1 - t0)).toFixed(1);
    const y = (v) => (H - B - (H - T - B) * v / top).toFixed(1);
    const nodes = [
      svg('line', { x1: L, x2: W - R, y1: y(top), y2: y(top), class: 'grid-line' }),
      svg('line', { x1: L, x2: W - R, y1: y(0), y2: y(0), class: 'grid-line' }),
      svg('text', { x: 4, y: Number(y(top)) + 4 }, fmt(top)),
      svg('text', { x: 4, y: Number(y(0)) + 4 }, '0'),
      svg('text', { x: L, y: H - 4 }, fmtSecs((t1 - t0) / 1000) + ' shown'),
    ];
    const keys = ['done', 'sent', 'failed'];
    if (s.some((p) => p.planned !== null)) keys.push('planned');
    let lx = W - R - 60 * keys.length;
    for (const k of keys) {
      nodes.push(svg('polyline', {
        class: 's-' + k,
        points: s.filter((p) => p[k] !== null).map((p) => x(p.t) + ',' + y(p[k])).join(' '),
      }));
      nodes.push(svg('text', { x: lx, y: H - 4, class: 'legend-' + k }, '— ' + k));
      lx += 60;
    }
    $('task-chart').replaceChildren(...nodes);
    const last = s[s.length - 1];
    $('chart-cap').textContent = 'Done ' + fmt(last.done) + ', sent ' + fmt(last.sent) +
      ', failed ' + fmt(last.failed) +
      (last.planned !== null ? ' (planned by now: ' + fmt(last.planned) + ')' : '') +
      ' of ' + fmt(total) + ' over the last ' +
      fmtSecs((t1 - t0) / 1000) + ', sampled every second while this page is open.';
  }

  function pct(n, of) {
    return of > 0 ? (100 * n / of).toFixed(1) + ' %' : '–';
  }

  /* The funnel as bars (one per step, its width the step's share of the
   * sent) and the table beside it; the per-minute series as lines. */
  function renderStats(j) {
    const rows = j.funnel.map((f) => {
      const tr = row([el('th', f.channel)].concat(FUNNEL.map((k) =>
        el('td', fmt(f[k]) + (k === 'sent' ? '' : ' (' + pct(f[k], f.sent) + ')'), 'num'))));
      tr.firstChild.scope = 'row';
      tr.dataset.channel = f.channel;
      return tr;
    });
    $('funnel-table').tBodies[0].replaceChildren(...rows);
    const f = j.funnel[0] || {};
    const W = 420, L = 80, R = 10, BAR = 30, GAP = 10;
    const top = Math.max(...FUNNEL.map((k) => f[k] || 0), 1);
    const nodes = [];
    FUNNEL.forEach((k, i) => {
      const y = GAP + i * (BAR + GAP);
      const w = Math.max((W - L - R) * (f[k] || 0) / top, 1);
      nodes.push(svg('text', { x: 4, y: y + BAR / 2 + 4 }, k));
      nodes.push(svg('rect', { x: L, y, width: w.toFixed(1), height: BAR, class: 'f-' + k,
        'data-step': k, 'data-value': String(f[k] || 0) }));
      /* The count inside a long bar, beside a short one. */
      const inside = w > 140;
      nodes.push(svg('text', { x: (inside ? L + 4 : L + w + 4).toFixed(1), y: y + BAR / 2 + 4,
        class: inside ? 'f-label' : '' },
      fmt(f[k] || 0) + (k === 'sent' ? '' : ' · ' + pct(f[k] || 0, f.sent))));
    });
    $('funnel-chart').replaceChildren(...nodes);
    $('funnel-cap').textContent = 'Sent ' + fmt(f.sent) + ', delivered ' + fmt(f.delivered) +
      ' (pulls), opened ' + fmt(f.opened) + ', clicked ' + fmt(f.clicked) + ' (' +
      pct(f.clicked || 0, f.sent) + ' of the sent).';
    renderSeries(j.series || []);
  }

  function renderSeries(series) {
    const W = 600, H = 160, L = 50, R = 10, T = 10, B = 20;
    /* One point per minute, the channels added up. */
    const byMin = new Map();
    for (const p of series) {
      const m = byMin.get(p.minute) || { t: Date.parse(p.minute) };
      for (const k of SERIES) m[k] = (m[k] || 0) + (p[k] || 0);
      byMin.set(p.minute, m);
    }
    const s = Array.from(byMin.values()).sort((a, b) => a.t - b.t);
    if (s.length === 0) {
      $('series-chart').replaceChildren(svg('text', { x: L, y: H / 2 }, 'no counts yet'));
      $('series-cap').textContent = 'Per minute: no counts yet.';
      return;
    }
    const top = Math.max(...s.map((p) => Math.max(...SERIES.map((k) => p[k] || 0))), 1);
    const t0 = s[0].t, t1 = Math.max(s[s.length - 1].t, t0 + 60000);
    const x = (t) => (L + (W - L - R) * (t - t0) / (t1 - t0)).toFixed(1);
    const y = (v) => (H - B - (H - T - B) * v / top).toFixed(1);
    const nodes = [
      svg('line', { x1: L, x2: W - R, y1: y(0), y2: y(0), class: 'grid-line' }),
      svg('text', { x: 4, y: Number(y(top)) + 4 }, fmt(top)),
      svg('text', { x: 4, y: Number(y(0)) + 4 }, '0'),
    ];
    let lx = W - R - 60 * SERIES.length;
    for (const k of SERIES) {
      nodes.push(svg('polyline', {
        class: 's-' + k, 'data-series': k,
        points: s.map((p) => x(p.t) + ',' + y(p[k] || 0)).join(' '),
      }));
      /* A dot per minute, so a campaign of one minute shows too (the last
       * SERIES_DOTS minutes: a week of them would be thousands of nodes). */
      for (const p of s.slice(-SERIES_DOTS))
        nodes.push(svg('circle', { cx: x(p.t), cy: y(p[k] || 0), r: 3, class: 'd-' + k }));
      nodes.push(svg('text', { x: lx, y: H - 4, class: 'legend-' + k }, '— ' + k));
      lx += 60;
    }
    $('series-chart').replaceChildren(...nodes);
    $('series-cap').textContent = 'Per minute over ' + s.length + ' minute(s): ' +
      SERIES.map((k) => k + ' ' + fmt(s.reduce((a, p) => a + (p[k] || 0), 0))).join(', ') + '.';
  }

  function renderChunks(j) {
    const rows = j.chunks.map((c) => row([el('td', c.seq, 'num'), el('td', fmt(c.remaining), 'num'),
      el('td', c.holder === null ? 'none (queued)' : c.holder),
      el('td', c.lease_ms_left === null ? '–' : fmtSecs(c.lease_ms_left / 1000))]));
    $('chunks-table').tBodies[0].replaceChildren(...rows);
    $('chunks-summary').textContent = j.chunks.length + ' chunk(s) in flight' +
      (j.truncated ? ' (the first 1,000 shown)' : '') + ', ' + fmt(j.parked) + ' parked.';
  }

  async function loadDeadLetters(id, more) {
    const gen = generation;
    const q = new URLSearchParams({ limit: String(DL_PAGE) });
    if (more && dlCursor) q.set('cursor', dlCursor);
    const j = await api('GET', '/v1/tasks/' + id + '/dead-letters?' + q.toString());
    if (gen !== generation) return;
    const body = $('dl-table').tBodies[0];
    /* HSCAN may return a member twice across pages: show it once. */
    const seen = new Set(more ? Array.from(body.rows, (r) => r.dataset.uid) : []);
    const rows = j.dead_letters.filter((d) => !seen.has(String(d.uid))).map((d) => {
      const tr = row([el('td', d.uid, 'num'), el('td', d.reason)]);
      tr.dataset.uid = d.uid;
      return tr;
    });
    if (more) body.append(...rows);
    else body.replaceChildren(...rows);
    dlCursor = j.cursor;
    $('dl-more').hidden = dlCursor === null || dlCursor === undefined;
    $('dl-msg').textContent = body.rows.length === 0 ? 'No dead letters.'
      : body.rows.length + ' dead letter(s) shown' + ($('dl-more').hidden ? '.' : '; more with More.');
  }

  function shownTaskId() {
    const m = /^#\/task\/(\d+)$/.exec(location.hash);
    return m ? m[1] : null;
  }

  /* POST PATH/ACTION (a task's or a series' pause, resume, cancel, end),
   * saying in the status line MSG what was asked and, on success, what
   * SAID makes of the answer. */
  async function control(path, action, msg, said) {
    $(msg).textContent = action + ' requested…';
    try {
      const j = await api('POST', path + '/' + action);
      $(msg).textContent = action + ': accepted (' + said(j) + ').';
      clearError();
    } catch (e) {
      $(msg).textContent = action + ' refused.';
      showError(e);
    }
  }

  function taskControl(action) {
    control('/v1/tasks/' + shownTaskId(), action, 'task-msg',
      (t) => 'state ' + t.state + ', control ' + t.control);
  }

  /* BTN asks for a second click on CONFIRM, which calls FN. */
  function confirmed(btn, confirm, fn) {
    $(btn).addEventListener('click', () => {
      $(confirm).hidden = false;
      $(confirm).focus();
    });
    $(confirm).addEventListener('click', () => {
      $(confirm).hidden = true;
      fn();
    });
  }

  $('btn-pause').addEventListener('click', () => taskControl('pause'));
  $('btn-resume').addEventListener('click', () => taskControl('resume'));
  confirmed('btn-cancel', 'btn-cancel-confirm', () => taskControl('cancel'));
  $('dl-reload').addEventListener('click', () => loadDeadLetters(shownTaskId(), false)
    .catch(showError));
  $('dl-more').addEventListener('click', () => loadDeadLetters(shownTaskId(), true)
    .catch(showError));
  $('dl-redrive').addEventListener('click', async () => {
    const id = shownTaskId();
    try {
      const j = await api('POST', '/v1/tasks/' + id + '/redrive');
      $('dl-msg').textContent = 'Redriven: ' + fmt(j.redriven) + ' dead letter(s).';
      clearError();
      await loadDeadLetters(id, false);
      $('dl-msg').textContent = 'Redriven: ' + fmt(j.redriven) + ' dead letter(s). ' +
        $('dl-msg').textContent;
    } catch (e) {
      showError(e);
    }
  });

  /* ---- subscribers (CSV) ---------------------------------------------------- */

  /* The uids of a CSV text as strings (the API takes digits as strings, so
   * uids above 2^53 stay exact), or an Error naming the first bad line.
   * The first field of each line counts; a first line that is not a uid is
   * a header; empty lines are skipped. */
  function parseCsv(text) {
    const uids = [];
    const lines = text.split(/\r\n|\n|\r/);
    for (let i = 0; i < lines.length; i++) {
      const f = lines[i].split(/[,;\t]/)[0].trim().replace(/^"(.*)"$/, '$1').trim();
      if (f === '') continue;
      if (!/^[0-9]{1,19}$/.test(f) || BigInt(f) < 1n || BigInt(f) > UID_MAX) {
        if (uids.length === 0 && i === 0) continue;
        throw new Error('line ' + (i + 1) + ': "' + f.slice(0, 40) +
          '" is not a uid (1..9223372036854775807); nothing was sent');
      }
      uids.push(f.replace(/^0+/, ''));
    }
    if (uids.length === 0) throw new Error('the file holds no uid');
    return uids;
  }

  $('subs-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const id = shownTaskId();
    const file = $('subs-file').files[0];
    const msg = $('subs-msg');
    const bar = $('subs-progress');
    if (!file) return;
    let uids;
    try {
      uids = parseCsv(await file.text());
    } catch (e) {
      msg.textContent = 'Upload refused: ' + e.message;
      return;
    }
    bar.max = uids.length;
    bar.value = 0;
    let batch = UPLOAD_BATCH, sent = 0, added = 0, batches = 0;
    msg.textContent = 'Uploading ' + fmt(uids.length) + ' uid(s)…';
    try {
      while (sent < uids.length) {
        const part = uids.slice(sent, sent + batch);
        let j;
        try {
          j = await api('POST', '/v1/tasks/' + id + '/subscribers', { uids: part });
        } catch (e) {
          if (e.code === 'too_many_ids' && batch > 1) {
            batch = Math.floor(batch / 2);
            continue;
          }
          throw e;
        }
        sent += part.length;
        added += j.added;
        batches++;
        bar.value = sent;
        msg.textContent = 'Uploaded ' + fmt(sent) + ' of ' + fmt(uids.length) + ' uid(s) in ' +
          batches + ' batch(es)…';
      }
      msg.textContent = 'Upload done: ' + fmt(sent) + ' uid(s) sent in ' + batches +
        ' batch(es), ' + fmt(added) + ' new subscription(s).';
      clearError();
    } catch (e) {
      msg.textContent = 'Upload stopped after ' + fmt(sent) + ' of ' + fmt(uids.length) +
        ' uid(s): the rest was not sent.';
      showError(e);
    }
  });

  /* ---- create -------------------------------------------------------------------- */

  function isoIn(ms) {
    return new Date(Date.now() + ms).toISOString().replace(/\.\d+Z$/, 'Z');
  }

  function showNew() {
    show('view-new');
    if (!$('n-due').value) $('n-due').value = isoIn(60000);
    $('n-name').focus();
  }

  /* The form's non-empty fields as a POST /v1/tasks body; throws on a bad
   * number or payload (the API validates everything else). */
  function formBody() {
    const body = {};
    for (const input of document.querySelectorAll('#new-form [data-field]')) {
      const v = input.value.trim();
      const k = input.dataset.field;
      if (v === '') continue;
      if (input.dataset.kind === 'bool') {
        body[k] = v === 'true';
      } else if (input.dataset.kind === 'int') {
        if (!/^[0-9]+$/.test(v)) throw new Error(k + ' must be a whole number');
        body[k] = Number(v);
      } else if (input.dataset.kind === 'json') {
        try {
          body[k] = JSON.parse(v);
        } catch (e) {
          throw new Error(k + ' is not JSON: ' + e.message);
        }
      } else {
        body[k] = k === 'title' || k === 'body' ? input.value : v;
      }
    }
    return body;
  }

  $('new-preview').addEventListener('click', async () => {
    const msg = $('new-msg');
    try {
      const body = formBody();
      const uid = $('n-uid').value.trim();
      if (!/^[0-9]+$/.test(uid)) throw new Error('the sample uid must be a whole number');
      body.uid = Number(uid);
      const j = await api('POST', '/v1/render', body);
      $('pv-uid').textContent = j.uid;
      $('pv-title').textContent = j.title;
      $('pv-body').textContent = j.body;
      $('pv-payload').textContent = JSON.stringify(j.payload, null, 2);
      $('preview').hidden = false;
      msg.textContent = 'Preview for uid ' + j.uid + ' shown below (nothing was stored).';
      clearError();
    } catch (e) {
      $('preview').hidden = true;
      msg.textContent = 'Preview refused.';
      showError(e);
    }
  });

  $('new-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const msg = $('new-msg');
    try {
      const t = await api('POST', '/v1/tasks', formBody());
      msg.textContent = 'Task ' + t.id + ' created.';
      clearError();
      $('new-form').reset();
      $('preview').hidden = true;
      location.hash = '#/task/' + t.id;
    } catch (e) {
      msg.textContent = 'Task not created.';
      showError(e);
    }
  });

  /* ---- audit log ----------------------------------------------------------------- */

  /* The filter and page come from the hash (#/audit?task=&actor=&action=&before=). */
  function showAudit() {
    show('view-audit');
    const p = listParams();
    for (const k of ['task', 'actor', 'action']) $('a-' + k).value = p.get(k) || '';
    $('audit-newest').disabled = !p.get('before');
    const gen = generation;
    const q = new URLSearchParams({ limit: String(AUDIT_PAGE) });
    for (const k of ['task', 'actor', 'action', 'before']) if (p.get(k)) q.set(k, p.get(k));
    api('GET', '/v1/audit?' + q.toString()).then((j) => {
      if (gen !== generation) return;
      const rows = j.audit.map((a) => {
        const tr = row([el('td', a.id, 'num'), el('td', a.at), el('td', a.actor),
          el('td', a.role === null ? '–' : a.role), el('td', a.via), el('td', a.peer),
          el('td', a.action), el('td', a.task_id === null ? '–' : a.task_id, 'num'),
          el('td', a.target === null ? '–' : a.target),
          el('td', a.before === null ? '–' : JSON.stringify(a.before), 'json'),
          el('td', a.after === null ? '–' : JSON.stringify(a.after), 'json')]);
        tr.dataset.audit = a.id;
        return tr;
      });
      $('audit-table').tBodies[0].replaceChildren(...rows);
      $('audit-status').textContent = rows.length === 0 ? 'No change matches.'
        : rows.length + ' change(s) shown' + (j.next === null ? '; no older ones.' : '.');
      const older = $('audit-older');
      older.disabled = j.next === null;
      older.dataset.next = older.disabled ? '' : String(j.next);
      clearError();
    }).catch(showError);
  }

  $('audit-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['task', 'actor', 'action']) if ($('a-' + k).value) p.set(k, $('a-' + k).value);
    location.hash = '#/audit?' + p.toString();
  });

  $('audit-older').addEventListener('click', () => {
    const p = listParams();
    p.set('before', $('audit-older').dataset.next);
    location.hash = '#/audit?' + p.toString();
  });

  $('audit-newest').addEventListener('click', () => {
    const p = listParams();
    p.delete('before');
    location.hash = '#/audit?' + p.toString();
  });

  /* ---- event webhooks ------------------------------------------------------------ */

  function showHooks() {
    show('view-hooks');
    $('hook-secret').textContent = '';
    poll(async (gen) => {
      const j = await api('GET', '/v1/hooks');
      if (gen !== generation) return;
      renderHooks(j.hooks);
      clearError();
    }, HOOKS_POLL_MS);
  }

  function hookButton(label, fn, cls) {
    const b = el('button', label, cls);
    b.type = 'button';
    b.addEventListener('click', async () => {
      try {
        $('hooks-msg').textContent = await fn();
        clearError();
      } catch (e) {
        showError(e);
      }
    });
    return b;
  }

  function renderHooks(hooks) {
    const rows = hooks.map((h) => {
      const acts = el('span', null, 'row');
      const on = h.state === 'enabled';
      acts.append(
        hookButton(on ? 'Disable' : 'Enable', async () => {
          await api('PATCH', '/v1/hooks/' + h.id, { state: on ? 'disabled' : 'enabled' });
          return 'Hook ' + h.id + (on ? ' disabled.' : ' enabled.');
        }),
        hookButton('Redrive', async () => {
          const j = await api('POST', '/v1/hooks/' + h.id + '/redrive');
          return 'Hook ' + h.id + ': ' + fmt(j.marked) + ' dead letter(s) to deliver again.';
        }),
        hookButton('Delete', async () => {
          await api('DELETE', '/v1/hooks/' + h.id);
          return 'Hook ' + h.id + ' deleted.';
        }, 'danger'));
      const state = el('td', h.state + (h.disabled_reason ? ': ' + h.disabled_reason : ''),
        'state state-' + (on ? 'done' : 'failed'));
      const tr = row([el('td', h.id, 'num'), state, el('td', h.url),
        el('td', h.types.length ? h.types.join(', ') : 'every type'),
        el('td', fmt(h.dead_letters), 'num'), el('td', h.failing_since || '–'), acts]);
      tr.dataset.hook = h.id;
      tr.dataset.state = h.state;
      return tr;
    });
    $('hooks-table').tBodies[0].replaceChildren(...rows);
    if (hooks.length === 0) $('hooks-msg').textContent = 'No event webhook registered.';
  }

  $('hook-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = { url: $('h-url').value.trim() };
    const types = $('h-types').value.split(',').map((t) => t.trim()).filter((t) => t);
    if (types.length) body.types = types;
    if ($('h-desc').value.trim()) body.description = $('h-desc').value.trim();
    try {
      const h = await api('POST', '/v1/hooks', body);
      $('hook-secret').textContent = 'Hook ' + h.id + ' registered. Its signing secret, ' +
        'shown only now: ' + h.secret;
      $('hook-form').reset();
      clearError();
    } catch (e) {
      $('hook-secret').textContent = 'Not registered.';
      showError(e);
    }
  });

  /* ---- series ---------------------------------------------------------------------- */

  /* The list's page comes from the hash (#/series?after=ID: the series above ID). */
  function showSeriesList() {
    show('view-series');
    const after = listParams().get('after');
    $('sr-first').disabled = !after;
    poll(async (gen) => {
      const j = await api('GET', '/v1/series' + (after ? '?after=' + encodeURIComponent(after) : ''));
      if (gen !== generation) return;
      const rows = j.series.map((s) => {
        const link = el('a', s.name);
        link.href = '#/series/' + s.id;
        const tr = row([el('td', s.id, 'num'), link, el('td', s.state, 'state state-' + s.state),
          el('td', s.rrule), el('td', s.tz + (s.local_time ? ' (each recipient\'s)' : '')),
          el('td', s.next_at || '–'), el('td', fmt(s.occurrences), 'num'),
          el('td', s.last_error || '–')]);
        tr.dataset.series = s.id;
        tr.dataset.state = s.state;
        return tr;
      });
      $('sr-table').tBodies[0].replaceChildren(...rows);
      const more = j.next_after !== undefined && j.next_after !== null;
      $('sr-status').textContent = rows.length === 0 ? 'No series.'
        : rows.length + ' series shown' + (more ? '; more with Next.' : '.');
      $('sr-next').disabled = !more;
      $('sr-next').dataset.next = more ? String(j.next_after) : '';
      clearError();
    }, SERIES_POLL_MS);
  }

  $('sr-next').addEventListener('click', () => {
    location.hash = '#/series?after=' + $('sr-next').dataset.next;
  });
  $('sr-first').addEventListener('click', () => {
    location.hash = '#/series';
  });

  function shownSeriesId() {
    const m = /^#\/series\/(\d+)$/.exec(location.hash);
    return m ? m[1] : null;
  }

  function showSeries(id) {
    show('view-one-series');
    $('one-series-h').textContent = 'Series ' + id;
    for (const m of ['os-msg', 'os-next-status', 'os-tasks-status']) $(m).textContent = '';
    for (const t of ['os-next', 'os-tasks']) $(t).tBodies[0].replaceChildren();
    $('os-details').replaceChildren();
    $('os-end-confirm').hidden = true;
    poll(async (gen) => {
      const s = await api('GET', '/v1/series/' + id + '/next?count=' + SERIES_NEXT);
      if (gen !== generation) return;
      renderOneSeries(s);
      clearError();
    }, SERIES_POLL_MS);
    poll(async (gen) => {
      const q = new URLSearchParams({ series: id, limit: String(SERIES_TASKS) });
      const j = await api('GET', '/v1/tasks?' + q.toString());
      if (gen !== generation) return;
      const rows = j.tasks.map((t) => {
        const link = el('a', 'Task ' + t.id);
        link.href = '#/task/' + t.id;
        const tr = row([link, el('td', t.state, 'state state-' + t.state), el('td', t.due_at)]);
        tr.dataset.task = t.id;
        return tr;
      });
      $('os-tasks').tBodies[0].replaceChildren(...rows);
      $('os-tasks-status').textContent = rows.length === 0 ? 'None written yet.'
        : rows.length + ' occurrence task(s) shown' + (j.next === null ? '.' : '; older ones exist.');
    }, SERIES_POLL_MS);
  }

  function renderOneSeries(s) {
    $('one-series-h').textContent = 'Series ' + s.id + ': ' + s.name;
    const st = $('os-state');
    st.textContent = s.state;
    st.className = 'state state-' + s.state;
    /* The states each change starts from (docs/api.md "Series"). */
    $('os-pause').disabled = s.state !== 'active';
    $('os-resume').disabled = s.state !== 'paused' && s.state !== 'failed';
    $('os-end').disabled = s.state === 'ended';
    if (s.state === 'ended') $('os-end-confirm').hidden = true;
    const rows = s.next.map((o) => row([el('td', o.wall),
      el('td', o.due_at === null ? 'each recipient\'s zone' : o.due_at)]));
    $('os-next').tBodies[0].replaceChildren(...rows);
    $('os-next-status').textContent = s.next_error ? 'Not expandable: ' + s.next_error
      : rows.length === 0 ? 'No more occurrences.'
        : 'The next ' + rows.length + ' not yet written' + (s.ends ? '; the rule ends after them.' : '.');
    renderDl('os-details', s, ['channel', 'topic', 'title', 'body', 'rrule',
      'dtstart', 'tz', 'local_time', 'exdate', 'catch_up', 'lead_s', 'occurrences', 'last_error',
      'variants']);
  }

  function seriesControl(action) {
    control('/v1/series/' + shownSeriesId(), action, 'os-msg', (s) => 'state ' + s.state);
  }

  $('os-pause').addEventListener('click', () => seriesControl('pause'));
  $('os-resume').addEventListener('click', () => seriesControl('resume'));
  confirmed('os-end', 'os-end-confirm', () => seriesControl('end'));

  /* ---- router -------------------------------------------------------------------- */

  async function route() {
    generation++;
    for (const t of timers) clearTimeout(t);
    timers = [];
    const h = location.hash || '#/';
    if (token() === null) {
      showLogin();
      return;
    }
    if (me === null) {
      const gen = generation;
      try {
        me = await api('GET', '/v1/me');
      } catch (e) {
        showError(e);
        return;
      }
      if (gen !== generation) return;
    }
    const id = shownTaskId();
    const sid = shownSeriesId();
    if (id !== null) showTask(id);
    else if (sid !== null) showSeries(sid);
    else if (h === '#/series' || h.startsWith('#/series?')) showSeriesList();
    else if (h === '#/new') showNew();
    else if (h === '#/audit' || h.startsWith('#/audit?')) showAudit();
    else if (h === '#/hooks') showHooks();
    else showList();
  }

  window.addEventListener('hashchange', () => {
    clearError();
    route();
  });
  route();
}());
