// The rightsize dashboard: a single page over the JSON API of `rightsize serve` (docs/api.md).
//
// Hash routes: #/ (cluster overview), #/jobs?user=&account=&state=&since=&until=&below=&cluster=
// (job list; since/until are YYYY-MM-DD days in UTC, `below` is an efficiency in percent),
// #/job/<cluster>/<id> (one job, live while it runs), #/report?since=&until=&by=&cluster=.
// Plain ES2020, no framework, no bundler: index.html paints the frame before any data arrives,
// then each page fetches what it shows. Every failed request ends as a visible message
// (data-testid="error"), never a blank page. A page's timers and requests stop when the route
// changes. Uses window.uPlot (charts) and window.FlameGraph (flame.js).
'use strict';

(() => {
  const view = document.getElementById('view');

  // ---------------------------------------------------------------- formatting
  const kKiB = 1024;
  const kMiB = 1024 * kKiB;
  const kGiB = 1024 * kMiB;
  const kTiB = 1024 * kGiB;
  const kDash = '—';  // unknown (the API's null), never shown as 0

  function Known(v) { return v !== null && v !== undefined && v !== '' && !Number.isNaN(v); }

  function Esc(s) {
    return String(s ?? '').replace(/[&<>"']/g, (c) => ({
      '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
    })[c]);
  }

  // Text from the API for HTML; unknown (null or "") shows as a dash.
  function Txt(v) { return Esc(Known(v) ? v : kDash); }

  function FmtNumber(v, digits = 0) {
    if (!Known(v)) return kDash;
    return Number(v).toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function FmtBytes(b) {
    if (!Known(b)) return kDash;
    const a = Math.abs(b);
    if (a >= kTiB) return `${(b / kTiB).toFixed(2)} TiB`;
    if (a >= kGiB) return `${(b / kGiB).toFixed(a >= 100 * kGiB ? 0 : 1)} GiB`;
    if (a >= kMiB) return `${(b / kMiB).toFixed(a >= 100 * kMiB ? 0 : 1)} MiB`;
    if (a >= kKiB) return `${(b / kKiB).toFixed(0)} KiB`;
    return `${Math.round(b)} B`;
  }

  function FmtCores(c) { return Known(c) ? FmtNumber(c, 1) : kDash; }

  function FmtPct(ratio) {
    if (!Known(ratio)) return kDash;
    const p = 100 * ratio;
    return `${Math.abs(p) < 10 && p !== 0 ? p.toFixed(1) : Math.round(p)}%`;
  }

  let currency = 'USD';
  function FmtDollars(d, cur = currency) {
    if (!Known(d)) return kDash;
    try {
      return Number(d).toLocaleString('en-US', {
        style: 'currency', currency: cur || 'USD',
        maximumFractionDigits: Math.abs(d) >= 1000 ? 0 : 2,
      });
    } catch (e) {  // not an ISO 4217 code
      return `${FmtNumber(d, 2)} ${cur}`;
    }
  }

  function FmtHours(h) { return Known(h) ? FmtNumber(h, Math.abs(h) >= 100 ? 0 : 1) : kDash; }

  // Times come as Unix seconds (API lists) or "YYYY-MM-DDTHH:MM:SSZ" (job records).
  function ToUnix(t) {
    if (!Known(t)) return null;
    if (typeof t === 'number') return t;
    if (/^\d+(\.\d+)?$/.test(t)) return Number(t);
    // The API's times are UTC; a string without a zone would otherwise be read as local time.
    const ms = Date.parse(/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?$/.test(t) ? `${t}Z` : t);
    return Number.isNaN(ms) ? null : ms / 1000;
  }

  function FmtTime(t) {
    const s = ToUnix(t);
    if (s === null) return kDash;
    const d = new Date(s * 1000);
    const p = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
  }

  function FmtDuration(s) {
    if (!Known(s)) return kDash;
    s = Math.max(0, Math.round(s));
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    if (d > 0) return `${d}d ${h}h`;
    if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
    if (m > 0) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
    return `${s}s`;
  }

  function DayToUnix(day) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day || '')) return null;
    const ms = Date.parse(`${day}T00:00:00Z`);
    return Number.isNaN(ms) ? null : ms / 1000;
  }

  // Colour classes for an efficiency (a ratio): red under 25%, orange under 50%, yellow under
  // 75%, green above; CPU over 105% (more threads than cores) is blue.
  function EffClass(ratio) {
    if (!Known(ratio)) return 'eff-none';
    if (ratio > 1.05) return 'eff-over';
    if (ratio >= 0.75) return 'eff-good';
    if (ratio >= 0.5) return 'eff-ok';
    if (ratio >= 0.25) return 'eff-poor';
    return 'eff-bad';
  }

  function EffBadge(ratio) {
    if (!Known(ratio)) return `<span class="eff eff-none" title="unknown">${kDash}</span>`;
    return `<span class="eff ${EffClass(ratio)}">${FmtPct(ratio)}</span>`;
  }

  function StateBadge(state) {
    if (!state) return kDash;
    return `<span class="state state-${Esc(String(state).replace(/[^A-Z_]/g, ''))}">${Esc(state)}</span>`;
  }

  function JobHref(cluster, id) {
    return `#/job/${encodeURIComponent(cluster)}/${encodeURIComponent(id)}`;
  }

  // ---------------------------------------------------------------- API access
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  const kTokenKey = 'rightsize.token';

  async function Api(path, ctx) {
    const headers = { Accept: 'application/json' };
    let token = null;
    try { token = localStorage.getItem(kTokenKey); } catch (e) { /* storage disabled */ }
    if (token) headers.Authorization = `Bearer ${token}`;
    let resp;
    try {
      resp = await fetch(path, { headers, cache: 'no-store', signal: ctx && ctx.signal });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, `The server could not be reached (${e.message}).`);
    }
    const text = await resp.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { /* reported below */ }
    if (!resp.ok) {
      const msg = body && typeof body.error === 'string' ? body.error : (text.trim().slice(0, 300) || resp.statusText);
      throw new ApiError(resp.status, msg);
    }
    if (body === null || typeof body !== 'object') {
      throw new ApiError(resp.status, `${path} answered with something that is not a JSON object.`);
    }
    return body;
  }

  function ErrorHtml(err, what) {
    const status = err instanceof ApiError ? err.status : -1;
    let head;
    if (status === 401) head = 'You are not signed in.';
    else if (status === 403) head = 'You are not allowed to see this.';
    else if (status === 404) head = `Not found: ${what}.`;
    else if (status >= 500) head = `The server failed while loading ${what} (HTTP ${status}).`;
    else if (status === 0) head = 'No connection to the rightsize server.';
    else if (status > 0) head = `The request for ${what} was refused (HTTP ${status}).`;
    else head = `Could not show ${what}.`;
    let html = `<div class="error" role="alert" data-testid="error" data-status="${status}">` +
      `<strong>${Esc(head)}</strong>${Esc(err.message || String(err))}`;
    if (status === 401) {
      html += `<form class="controls" id="token-form" style="margin:8px 0 0">
        <label>Access token (kept in this browser)<input type="password" id="token-input" autocomplete="off" required></label>
        <button class="primary" type="submit">Use token</button></form>`;
    }
    return html + '</div>';
  }

  function ShowError(target, err, what) {
    if (err && err.name === 'AbortError') return;
    if (!target.isConnected) return;
    target.innerHTML = ErrorHtml(err, what);
    const form = target.querySelector('#token-form');
    if (form) {
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        try { localStorage.setItem(kTokenKey, form.querySelector('#token-input').value.trim()); } catch (x) { /* ignore */ }
        Route();
      });
    }
  }

  // ---------------------------------------------------------------- routing and page lifetime
  let page = null;  // {signal, alive(), every(), onLeave()} of the page on screen

  function NewPage() {
    if (page) page.leave();
    const abort = new AbortController();
    const timers = [];
    const leaves = [];
    let alive = true;
    page = {
      signal: abort.signal,
      alive: () => alive,
      // Runs fn every ms (not overlapping itself) while the page is on screen.
      every(ms, fn) {
        let busy = false;
        const id = setInterval(async () => {
          if (busy || !alive) return;
          busy = true;
          try { await fn(); } catch (e) { if (e.name !== 'AbortError') console.warn(e); } finally { busy = false; }
        }, ms);
        timers.push(id);
        return () => { clearInterval(id); };
      },
      onLeave(fn) { leaves.push(fn); },
      leave() {
        alive = false;
        abort.abort();
        timers.forEach(clearInterval);
        leaves.forEach((fn) => { try { fn(); } catch (e) { console.warn(e); } });
      },
    };
    return page;
  }

  function ParseHash() {
    const h = location.hash.replace(/^#/, '') || '/';
    const q = h.indexOf('?');
    const path = q < 0 ? h : h.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
    return { path: path || '/', params };
  }

  function SetNav(name) {
    for (const a of document.querySelectorAll('nav a[data-nav]')) {
      const on = a.dataset.nav === name;
      a.classList.toggle('active', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
  }

  function Route() {
    const ctx = NewPage();
    const { path, params } = ParseHash();
    let m;
    let run;
    if (path === '/' || path === '') {
      SetNav('overview');
      run = PageOverview(ctx);
    } else if (path === '/jobs') {
      SetNav('jobs');
      run = PageJobs(ctx, params);
    } else if ((m = path.match(/^\/job\/([^/]+)\/(.+)$/))) {
      SetNav('jobs');
      run = PageJob(ctx, decodeURIComponent(m[1]), decodeURIComponent(m[2]));
    } else if (path === '/report') {
      SetNav('report');
      run = PageReport(ctx, params);
    } else {
      SetNav('');
      document.title = 'Not found · rightsize';
      view.innerHTML = '<h1>Page not found</h1><div id="page-body"></div>';
      ShowError(view.querySelector('#page-body'), new ApiError(404, `there is no page "${location.hash}"; try Overview, Jobs or Report.`), 'this page');
      return;
    }
    run.catch((e) => {
      if (e.name === 'AbortError' || !ctx.alive()) return;
      console.error(e);
      const body = view.querySelector('#page-body') || view;
      ShowError(body, e, ctx.what || 'this page');
    });
  }

  function SetPage(title, html) {
    document.title = `${title} · rightsize`;
    view.innerHTML = html;
  }

  // ---------------------------------------------------------------- #/ overview
  function UsageBar(label, used, allocated, fmt) {
    const share = Known(used) && Known(allocated) && allocated > 0 ? used / allocated : null;
    const cls = share === null ? '' : share < 0.25 ? 'low' : share < 0.5 ? 'mid' : '';
    const width = share === null ? 0 : Math.min(100, 100 * share);
    const nums = Known(allocated) && allocated > 0
      ? `${fmt(used)} of ${fmt(allocated)} (${FmtPct(share)})`
      : `${fmt(used)} used, none held`;
    return `<span>${Esc(label)}</span>
      <div class="bar ${cls}" role="meter" aria-label="${Esc(label)} used of held" aria-valuemin="0" aria-valuemax="100" aria-valuenow="${width.toFixed(0)}"><span style="width:${width.toFixed(1)}%"></span></div>
      <span class="nums">${nums}</span>`;
  }

  // A UTC day, as the server's window notes write it.
  function FmtDay(t) { return new Date(t * 1000).toISOString().slice(0, 10); }

  function ClusterCard(c) {
    const now = c.now || {};
    const alloc = now.allocated || {};
    const used = now.used || {};
    const today = c.today || {};
    const week = c.week || {};
    // docs/api.md puts top_wasters on the cluster; the server may also give them per period.
    const wasters = c.top_wasters || week.top_wasters || [];
    // Nothing ended in the last 7 days: the server gives the 7 days up to the last job that ended.
    const week_label = week.latest_with_data && Known(week.until)
      ? `7 days up to ${FmtDay(week.until - 1)}` : 'Last 7 days';
    const wasters_title = c.top_wasters ? 'Top wasters' : `Top wasters, ${week_label.replace(/^L/, 'l')}`;
    const gpu_fmt = (v) => FmtNumber(v, Known(v) && v % 1 !== 0 ? 1 : 0);
    return `<section class="card" data-testid="cluster" data-cluster="${Esc(c.cluster)}" aria-labelledby="cl-${Esc(c.cluster)}">
      <h2 id="cl-${Esc(c.cluster)}">${Esc(c.cluster)}</h2>
      <div class="kpis">
        <div class="kpi"><span class="v" data-testid="running-jobs" data-value="${Number(c.running_jobs) || 0}">
          <a href="#/jobs?cluster=${encodeURIComponent(c.cluster)}&amp;state=RUNNING">${FmtNumber(c.running_jobs)}</a></span>
          <span class="l">running jobs</span></div>
        <div class="kpi"><span class="v">${FmtDollars(today.wasted_dollars)}</span><span class="l">wasted today</span></div>
        <div class="kpi"><span class="v" data-testid="week-wasted">${FmtDollars(week.wasted_dollars)}</span><span class="l">wasted in the ${Esc(week_label.replace(/^L/, 'l'))}</span></div>
      </div>
      ${week.note ? `<p class="notice" data-testid="week-note">${Esc(week.note[0].toUpperCase() + week.note.slice(1))}.</p>` : ''}
      <h3>Held by running jobs vs used now</h3>
      <div class="bars">
        ${UsageBar('CPU cores', used.cpus, alloc.cpus, FmtCores)}
        ${UsageBar('Memory', used.memory_bytes, alloc.memory_bytes, FmtBytes)}
        ${UsageBar('GPUs', used.gpus, alloc.gpus, gpu_fmt)}
        ${UsageBar('GPU memory', used.gpu_memory_bytes, alloc.gpu_memory_bytes, FmtBytes)}
      </div>
      <h3>Waste</h3>
      <div class="table-wrap"><table>
        <thead><tr><th scope="col">Period</th><th scope="col" class="num">GPU-hours</th><th scope="col" class="num">Core-hours</th><th scope="col" class="num">Dollars</th></tr></thead>
        <tbody>
          <tr><th scope="row">Today</th><td class="num">${FmtHours(today.wasted_gpu_hours)}</td><td class="num">${FmtHours(today.wasted_core_hours)}</td><td class="num">${FmtDollars(today.wasted_dollars)}</td></tr>
          <tr><th scope="row">${Esc(week_label)}</th><td class="num">${FmtHours(week.wasted_gpu_hours)}</td><td class="num">${FmtHours(week.wasted_core_hours)}</td><td class="num">${FmtDollars(week.wasted_dollars)}</td></tr>
        </tbody></table></div>
      <h3>${wasters_title}</h3>
      ${wasters.length === 0 ? '<p class="muted">No waste recorded.</p>' : `<div class="table-wrap"><table data-testid="top-wasters">
        <thead><tr><th scope="col">User</th><th scope="col" class="num">Jobs</th><th scope="col" class="num">Wasted</th></tr></thead>
        <tbody>${wasters.map((w) => `<tr><td><a href="#/jobs?cluster=${encodeURIComponent(c.cluster)}&amp;user=${encodeURIComponent(w.user ?? '')}">${Esc(w.user ?? '(unknown)')}</a></td>
          <td class="num">${FmtNumber(w.jobs)}</td><td class="num">${FmtDollars(w.wasted_dollars)}</td></tr>`).join('')}</tbody></table></div>`}
    </section>`;
  }

  async function PageOverview(ctx) {
    ctx.what = 'the cluster overview';
    SetPage('Overview', `<h1>Cluster overview</h1><div id="page-body" data-testid="overview"><p class="muted" data-testid="loading">Loading…</p></div>`);
    const body = view.querySelector('#page-body');
    const load = async () => {
      const data = await Api('/api/v1/overview', ctx);
      if (!ctx.alive()) return;
      const clusters = data.clusters || [];
      if (clusters.length === 0) {
        body.innerHTML = '<p class="notice">No jobs in the store yet: feed it with <code>rightsize ingest</code>, or point node agents at this server.</p>';
        return;
      }
      if (Known(data.user) || data.admin) {
        document.getElementById('who').dataset.user = `${data.user || 'anonymous'}${data.admin ? ' (admin)' : ''}`;
        ShowWho();
      }
      const running = clusters.reduce((s, c) => s + (Number(c.running_jobs) || 0), 0);
      body.innerHTML = `<p class="muted"><span data-testid="running-total" data-value="${running}">${FmtNumber(running)}</span> running jobs on ${clusters.length} cluster${clusters.length === 1 ? '' : 's'} · updated ${FmtTime(Date.now() / 1000)}</p>
        <div class="cards">${clusters.map(ClusterCard).join('')}</div>`;
    };
    await load();
    ctx.every(30000, load);
  }

  // ---------------------------------------------------------------- #/jobs
  const kStates = ['RUNNING', 'COMPLETED', 'FAILED', 'OUT_OF_MEMORY', 'TIMEOUT', 'CANCELLED', 'NODE_FAIL', 'PREEMPTED'];
  const kFilterKeys = ['cluster', 'user', 'account', 'state', 'since', 'until', 'below'];

  function JobRow(j) {
    const ended = Known(j.end_time);
    const start = ToUnix(j.start_time);
    // Only a job running now (docs/api.md, "Running now") has an elapsed time that grows with
    // the clock: a job without an end from an old trace or export is not running since 2002.
    const live = j.running_now === true;
    const elapsed = Known(j.elapsed_s) ? j.elapsed_s : (start !== null && !ended && live ? Date.now() / 1000 - start : null);
    const stale = !ended && !live && j.state === 'RUNNING'
      ? ' <span class="muted" data-testid="not-seen" title="RUNNING in accounting that is not recent, and no agent has seen it lately">not seen lately</span>' : '';
    const has_gpus = Known(j.gpus) && j.gpus > 0;
    const gpu_eff = has_gpus && Known(j.gpu_util_pct) ? j.gpu_util_pct / 100 : null;
    const mem = Known(j.peak_memory_bytes) || Known(j.memory_bytes)
      ? `${FmtBytes(j.peak_memory_bytes)} <span class="muted">of ${FmtBytes(j.memory_bytes)}</span>` : kDash;
    return `<tr data-testid="job-row" data-cluster="${Esc(j.cluster)}" data-job-id="${Esc(j.job_id)}" data-href="${Esc(JobHref(j.cluster, j.job_id))}">
      <td><a href="${Esc(JobHref(j.cluster, j.job_id))}" data-testid="job-link">${Esc(j.job_id)}</a> <span class="muted">${Esc(j.cluster)}</span></td>
      <td>${Txt(j.user)}</td>
      <td>${Txt(j.account)}</td>
      <td>${Txt(j.name)}</td>
      <td>${StateBadge(j.state)}${stale}</td>
      <td class="num">${ended ? FmtTime(j.end_time) : FmtTime(j.start_time)}</td>
      <td class="num">${FmtDuration(elapsed)}</td>
      <td class="num">${FmtNumber(j.cpus, Known(j.cpus) && j.cpus % 1 !== 0 ? 1 : 0)}</td>
      <td class="num" data-testid="eff-cpu">${EffBadge(j.cpu_efficiency)}</td>
      <td class="num">${mem}</td>
      <td class="num" data-testid="eff-memory">${EffBadge(j.memory_efficiency)}</td>
      <td class="num">${has_gpus ? FmtNumber(j.gpus) : kDash}</td>
      <td class="num" data-testid="eff-gpu">${has_gpus ? EffBadge(gpu_eff) : kDash}</td>
    </tr>`;
  }

  function JobsApiQuery(params) {
    const q = new URLSearchParams();
    for (const k of ['cluster', 'user', 'account', 'state']) {
      const v = (params.get(k) || '').trim();
      if (v) q.set(k, v);
    }
    const since = DayToUnix(params.get('since'));
    const until = DayToUnix(params.get('until'));
    if (since !== null) q.set('since', String(since));
    if (until !== null) q.set('until', String(until + 86400));  // the whole "until" day
    const below = parseFloat(params.get('below'));
    if (Number.isFinite(below)) q.set('efficiency_below', String(Math.max(0, Math.min(100, below)) / 100));
    q.set('limit', '100');
    return q;
  }

  async function PageJobs(ctx, params) {
    const v = (k) => Esc(params.get(k) || '');
    const state = params.get('state') || '';
    const states = kStates.includes(state) || !state ? kStates : [...kStates, state];
    SetPage('Jobs', `<h1>Jobs</h1>
      <form class="filters" id="job-filters" role="search" aria-label="Filter jobs">
        <label for="filter-user">User<input id="filter-user" name="user" value="${v('user')}" autocomplete="off"></label>
        <label for="filter-account">Account<input id="filter-account" name="account" value="${v('account')}" autocomplete="off"></label>
        <label for="filter-cluster">Cluster<input id="filter-cluster" name="cluster" value="${v('cluster')}" autocomplete="off"></label>
        <label for="filter-state">State<select id="filter-state" name="state">
          <option value="">any</option>
          ${states.map((s) => `<option value="${Esc(s)}"${s === state ? ' selected' : ''}>${Esc(s)}</option>`).join('')}
        </select></label>
        <label for="filter-since">Since (UTC day)<input id="filter-since" name="since" type="date" value="${v('since')}"></label>
        <label for="filter-until">Until (UTC day, included)<input id="filter-until" name="until" type="date" value="${v('until')}"></label>
        <label for="filter-below">CPU or memory efficiency below (%)<input id="filter-below" name="below" type="number" min="0" max="100" step="1" value="${v('below')}"></label>
        <button class="primary" type="submit" id="filter-apply">Apply</button>
        <button type="button" id="filter-clear">Clear</button>
      </form>
      <div id="page-body">
        <div class="table-wrap"><table data-testid="jobs-table">
          <caption class="muted" style="text-align:left;padding:6px 8px" id="jobs-count" data-testid="jobs-count" aria-live="polite">Loading…</caption>
          <thead><tr>
            <th scope="col">Job</th><th scope="col">User</th><th scope="col">Account</th><th scope="col">Name</th>
            <th scope="col">State</th><th scope="col" class="num">Ended / started</th><th scope="col" class="num">Elapsed</th>
            <th scope="col" class="num">CPUs</th><th scope="col" class="num">CPU eff.</th><th scope="col" class="num">Peak memory</th>
            <th scope="col" class="num">Mem. eff.</th><th scope="col" class="num">GPUs</th><th scope="col" class="num">GPU util.</th>
          </tr></thead>
          <tbody id="jobs-body"></tbody>
        </table></div>
        <div class="pager"><button type="button" id="jobs-more" hidden>Show more jobs</button></div>
      </div>`);

    const form = view.querySelector('#job-filters');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const k of kFilterKeys) {
        const el = form.elements.namedItem(k);
        const val = el ? el.value.trim() : '';
        if (val) q.set(k, val);
      }
      const hash = `#/jobs${q.toString() ? `?${q}` : ''}`;
      if (location.hash === hash) Route(); else location.hash = hash;
    });
    view.querySelector('#filter-clear').addEventListener('click', () => {
      if (location.hash === '#/jobs') Route(); else location.hash = '#/jobs';
    });

    const tbody = view.querySelector('#jobs-body');
    const count = view.querySelector('#jobs-count');
    const more = view.querySelector('#jobs-more');
    tbody.addEventListener('click', (e) => {
      if (e.target.closest('a')) return;
      const tr = e.target.closest('tr[data-href]');
      if (tr) location.hash = tr.dataset.href;
    });

    const query = JobsApiQuery(params);
    let shown = 0;
    let cursor = null;
    const load = async () => {
      const q = new URLSearchParams(query);
      if (cursor) q.set('cursor', cursor);
      more.disabled = true;
      let data;
      try {
        data = await Api(`/api/v1/jobs?${q}`, ctx);
      } catch (e) {
        ShowError(view.querySelector('#page-body'), e, 'the job list');
        return;
      }
      if (!ctx.alive()) return;
      const jobs = data.jobs || [];
      tbody.insertAdjacentHTML('beforeend', jobs.map(JobRow).join(''));
      shown += jobs.length;
      cursor = data.next_cursor || null;
      more.hidden = !cursor;
      more.disabled = false;
      if (shown === 0) {
        tbody.innerHTML = '<tr><td colspan="13" class="muted" data-testid="no-jobs">No jobs match these filters.</td></tr>';
      }
      count.textContent = `${FmtNumber(shown)} job${shown === 1 ? '' : 's'} shown${cursor ? ', more below' : ''}`;
      count.dataset.count = String(shown);
    };
    more.addEventListener('click', load);
    await load();
  }

  // ---------------------------------------------------------------- #/job/<cluster>/<id>
  // The job record, from either schema (rightsize.job/v1's nested record or a flat one).
  function NormJob(j) {
    j = j || {};
    const req = j.request || {};
    const alloc = j.allocation || {};
    const usage = j.usage || {};
    const out = j.outcome || {};
    return {
      cluster: j.cluster,
      id: j.job_id,
      user: req.user ?? j.user,
      account: req.account ?? j.account,
      name: req.job_name ?? j.name ?? j.job_name,
      partition: req.partition ?? j.partition,
      state: out.state ?? j.state,
      exit_code: out.exit_code ?? j.exit_code,
      submit: ToUnix(j.submit_time),
      start: ToUnix(j.start_time),
      end: ToUnix(j.end_time),
      time_limit_s: req.time_limit_s ?? j.time_limit_s,
      req_cpus: req.cpus ?? j.cpus,
      cpus: alloc.cpus ?? req.cpus ?? j.cpus,
      req_mem: req.memory_bytes ?? j.memory_bytes,
      mem: alloc.memory_bytes ?? req.memory_bytes ?? j.memory_bytes,
      req_gpus: req.gpus ?? j.gpus,
      gpus: alloc.gpus ?? req.gpus ?? j.gpus,
      gpu_type: alloc.gpu_type ?? req.gpu_type ?? j.gpu_type,
      nodes: alloc.nodes ?? req.nodes,
      node_list: alloc.node_list,
      elapsed_s: usage.elapsed_s ?? j.elapsed_s,
      cpu_time_s: usage.cpu_time_s ?? j.cpu_time_s,
      peak_mem: usage.peak_memory_bytes ?? j.peak_memory_bytes,
      gpu_util_pct: usage.gpu_util_pct ?? j.gpu_util_pct,
      peak_gpu_mem: usage.peak_gpu_memory_bytes ?? j.peak_gpu_memory_bytes,
      io_read: usage.io_read_bytes,
      io_write: usage.io_write_bytes,
    };
  }

  // Charts of the job page: which metrics each plots and against which limit.
  const kCharts = [
    { id: 'cpu_cores', title: 'CPU cores: used vs allocated', metrics: ['cpu_cores'], limit: 'cpu_cores', limit_label: 'allocated', fmt: FmtCores, axis: 'number', show_max: true },
    { id: 'memory_bytes', title: 'Memory: used vs request', metrics: ['memory_bytes', 'cgroup_memory_bytes'], limit: 'memory_bytes', limit_label: 'request', fmt: FmtBytes, axis: 'bytes', show_max: true },
    { id: 'gpu_util_pct', title: 'GPU utilisation', metrics: ['gpu_util_pct'], fixed_limit: 100, limit_label: '100%', fmt: (v) => (Known(v) ? `${FmtNumber(v, 0)}%` : kDash), axis: 'percent', show_max: true },
    { id: 'gpu_memory_bytes', title: 'GPU memory vs capacity', metrics: ['gpu_memory_bytes'], limit: 'gpu_memory_bytes', limit_label: 'capacity', fmt: FmtBytes, axis: 'bytes', show_max: true },
    { id: 'io', title: 'I/O: bytes read and written', metrics: ['io_read_bytes', 'io_write_bytes'], fmt: FmtBytes, axis: 'bytes' },
    { id: 'processes', title: 'Processes and threads', metrics: ['processes', 'threads'], fmt: (v) => FmtNumber(v, 0), axis: 'count' },
  ];

  // The y axis's tick steps and labels. Counts step by whole numbers (a tick at 1.5 processes
  // read "2" beside the one at 2); bytes step by binary units; every axis takes as many decimals
  // as its labels need to differ, so no two ticks read the same.
  const kDecimalIncrs = [];
  for (let e = -3; e <= 15; e++) for (const m of [1, 2, 2.5, 5]) kDecimalIncrs.push(m * 10 ** e);
  const kCountIncrs = kDecimalIncrs.filter((v) => v >= 1 && Number.isInteger(v));
  const kByteIncrs = [];
  for (const unit of [1, kKiB, kMiB, kGiB, kTiB]) for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) kByteIncrs.push(m * unit);
  function AxisLabels(kind, splits) {
    const top = Math.max(0, ...splits.map((v) => Math.abs(v)));
    let unit = 1;
    let suffix = kind === 'percent' ? '%' : '';
    if (kind === 'bytes') {
      [unit, suffix] = top >= kTiB ? [kTiB, ' TiB'] : top >= kGiB ? [kGiB, ' GiB'] : top >= kMiB ? [kMiB, ' MiB'] : top >= kKiB ? [kKiB, ' KiB'] : [1, ' B'];
    }
    let labels = [];
    for (let digits = 0; digits <= 4; digits++) {
      labels = splits.map((v) => `${FmtNumber(v / unit, digits)}${suffix}`);
      if (new Set(labels).size === labels.length) break;
    }
    return labels;
  }
  // The newest known value of a series: what its legend shows while the cursor is off the chart.
  function LastKnown(values) {
    for (let i = (values || []).length - 1; i >= 0; i--) if (Number.isFinite(values[i])) return values[i];
    return null;
  }
  const kMetricLabels = {
    cpu_cores: 'cores used', memory_bytes: 'memory (RSS)', cgroup_memory_bytes: 'memory (cgroup)',
    gpu_util_pct: 'GPU utilisation', gpu_memory_bytes: 'GPU memory', io_read_bytes: 'read',
    io_write_bytes: 'written', processes: 'processes', threads: 'threads',
  };
  const kColours = ['#2357c6', '#1d7a3a', '#8a3ab9', '#b35400'];

  // Replaces the points of `old` from the first time in `fresh` on (a live poll asks again from
  // the last time seen, so the last step comes back complete) and appends the rest.
  function MergePoints(old, fresh) {
    if (!fresh || fresh.length === 0) return old;
    fresh = fresh.filter((p) => Array.isArray(p) && Number.isFinite(p[0])).sort((a, b) => a[0] - b[0]);
    if (fresh.length === 0) return old;
    const t0 = fresh[0][0];
    let i = old.length;
    while (i > 0 && old[i - 1][0] >= t0) i--;
    return old.slice(0, i).concat(fresh);
  }

  class JobCharts {
    constructor(container, ctx) {
      this.container_ = container;
      this.points_ = {};  // metric → [[t, mean, max], …]
      this.limits_ = {};
      this.charts_ = {};  // chart id → {def, el, plot, uplot}
      this.last_t_ = null;
      container.innerHTML = kCharts.map((d) => `<section class="chart" data-testid="chart-${d.id}" data-points="0" hidden aria-label="${Esc(d.title)}">
        <h3>${Esc(d.title)}</h3><div class="plot"></div></section>`).join('');
      for (const d of kCharts) {
        const el = container.querySelector(`[data-testid="chart-${d.id}"]`);
        this.charts_[d.id] = { def: d, el, plot: el.querySelector('.plot'), uplot: null };
      }
      if (window.ResizeObserver) {
        const ro = new ResizeObserver(() => {
          for (const c of Object.values(this.charts_)) {
            if (c.uplot) c.uplot.setSize({ width: this.Width(c), height: 220 });
          }
        });
        ro.observe(container);
        ctx.onLeave(() => ro.disconnect());
      }
      ctx.onLeave(() => { for (const c of Object.values(this.charts_)) if (c.uplot) c.uplot.destroy(); });
    }

    get lastTime() { return this.last_t_; }
    Points(metric) { return this.points_[metric] || []; }

    Width(c) { return Math.max(280, c.plot.clientWidth || c.el.clientWidth - 20); }

    // Adds a /series answer and redraws the charts whose metrics changed.
    Add(resp) {
      const series = resp.series || {};
      Object.assign(this.limits_, resp.limits || {});
      const changed = new Set();
      for (const [metric, pts] of Object.entries(series)) {
        if (!Array.isArray(pts) || pts.length === 0) continue;
        this.points_[metric] = MergePoints(this.points_[metric] || [], pts);
        const last = this.points_[metric][this.points_[metric].length - 1][0];
        if (this.last_t_ === null || last > this.last_t_) this.last_t_ = last;
        changed.add(metric);
      }
      for (const c of Object.values(this.charts_)) {
        if (c.def.metrics.some((m) => changed.has(m))) this.Draw(c);
      }
    }

    Draw(c) {
      const d = c.def;
      const metrics = d.metrics.filter((m) => (this.points_[m] || []).length > 0);
      if (metrics.length === 0) return;
      c.el.hidden = false;
      // One time axis for the chart's metrics; a metric without a point at a time gets null.
      const times = [...new Set(metrics.flatMap((m) => this.points_[m].map((p) => p[0])))].sort((a, b) => a - b);
      const index = new Map(times.map((t, i) => [t, i]));
      const data = [times];
      const one = metrics.length === 1;
      // The value under the cursor; off the chart, the newest one (not a dash until hovered).
      const hovered = (u, v, sidx, idx) => (idx === null || idx === undefined ? LastKnown(u.data[sidx]) : v);
      const legend_value = (u, v, sidx, idx) => d.fmt(hovered(u, v, sidx, idx));
      const series = [{ value: (u, v, sidx, idx) => {
        const t = hovered(u, v, sidx, idx);
        return Known(t) ? new Date(t * 1000).toLocaleTimeString('en-GB') : kDash;
      } }];
      metrics.forEach((m, k) => {
        const mean = new Array(times.length).fill(null);
        const max = new Array(times.length).fill(null);
        for (const p of this.points_[m]) {
          const i = index.get(p[0]);
          mean[i] = Number.isFinite(p[1]) ? p[1] : null;
          max[i] = Number.isFinite(p[2]) ? p[2] : mean[i];
        }
        data.push(mean);
        series.push({ label: one ? `${kMetricLabels[m] || m} (mean)` : (kMetricLabels[m] || m), stroke: kColours[k], width: 2, spanGaps: true, value: legend_value });
        if (d.show_max && one) {
          data.push(max);
          series.push({ label: 'max', stroke: '#8fa8dc', width: 1, dash: [4, 3], spanGaps: true, value: legend_value });
        }
      });
      const limit = d.fixed_limit !== undefined ? d.fixed_limit : (d.limit ? this.limits_[d.limit] : undefined);
      if (Known(limit)) {
        data.push(times.map(() => limit));
        series.push({ label: d.limit_label, stroke: '#b3261e', width: 1.5, dash: [7, 4], value: legend_value });
      }
      c.el.dataset.points = String(times.length);

      if (!window.uPlot) {
        c.plot.textContent = `${times.length} points (the chart library did not load).`;
        return;
      }
      if (c.uplot && c.uplot.series.length !== series.length) {
        c.uplot.destroy();
        c.uplot = null;
      }
      if (!c.uplot) {
        const opts = {
          width: this.Width(c),
          height: 220,
          series,
          scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.08 : 1] } },
          axes: [{}, {
            size: 72,
            incrs: d.axis === 'count' ? kCountIncrs : d.axis === 'bytes' ? kByteIncrs : kDecimalIncrs,
            values: (u, splits) => {
              const labels = AxisLabels(d.axis, splits);
              c.el.dataset.yTicks = labels.join('|');  // what the axis shows, for the tests
              return labels;
            },
          }],
          legend: { live: true },
        };
        c.plot.innerHTML = '';
        c.uplot = new window.uPlot(opts, data, c.plot);
      } else {
        c.uplot.setData(data);
      }
    }
  }

  const kTargets = {
    runtime: { label: 'Run time', fmt: FmtDuration },
    peak_memory: { label: 'Peak memory', fmt: FmtBytes },
    cpu_cores: { label: 'CPU cores', fmt: FmtCores },
    gpu_memory: { label: 'GPU memory', fmt: FmtBytes },
    gpu_util: { label: 'GPU utilisation', fmt: (v) => (Known(v) ? `${FmtNumber(v, 0)}%` : kDash) },
  };

  function MaxOf(points, k) {
    let m = null;
    for (const p of points) if (Number.isFinite(p[k]) && (m === null || p[k] > m)) m = p[k];
    return m;
  }
  function MeanOf(points) {
    const v = points.map((p) => p[1]).filter(Number.isFinite);
    return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
  }

  // What the job really used, from the record, else (a running job) from its series so far.
  function Actuals(job, charts, running) {
    const elapsed = Known(job.elapsed_s) ? job.elapsed_s
      : (job.start !== null ? (job.end ?? Date.now() / 1000) - job.start : null);
    const cpu_mean = Known(job.cpu_time_s) && elapsed > 0 ? job.cpu_time_s / elapsed : MeanOf(charts.Points('cpu_cores'));
    const series_peak_mem = MaxOf(charts.Points('memory_bytes'), 2);
    return {
      running,
      elapsed,
      runtime: elapsed,
      cpu_cores: cpu_mean,
      peak_memory: Known(job.peak_mem) ? job.peak_mem : series_peak_mem,
      gpu_memory: Known(job.peak_gpu_mem) ? job.peak_gpu_mem : MaxOf(charts.Points('gpu_memory_bytes'), 2),
      gpu_util: Known(job.gpu_util_pct) ? job.gpu_util_pct : MeanOf(charts.Points('gpu_util_pct')),
    };
  }

  // The job's energy (the server's "energy": kWh, CO2e at the price file's grid factor), or
  // "unknown" when nothing measured it: never 0.
  function EnergyRowHtml(e, so_far) {
    if (!e) return '';
    const kwh = Known(e.kwh) ? `${FmtNumber(e.kwh, e.kwh < 1 ? 4 : 2)} kWh${so_far}` : 'unknown';
    const co2 = Known(e.co2e_kg) ? `, ${FmtNumber(e.co2e_kg, e.co2e_kg < 1 ? 3 : 1)} kg CO2e` : '';
    return `<tr data-testid="job-energy"><th scope="row">Energy</th><td class="num">${kDash}</td><td class="num">${kDash}</td><td class="num">${kwh}${co2}</td><td class="num">${kDash}</td></tr>`;
  }

  function JobHeadHtml(detail, job, act) {
    const eff = detail.efficiency || {};
    const live = act.running;
    const so_far = live ? ' <span class="muted">so far</span>' : '';
    const cpu_eff = Known(eff.cpu) ? eff.cpu : (Known(act.cpu_cores) && job.cpus > 0 ? act.cpu_cores / job.cpus : null);
    const mem_eff = Known(eff.memory) ? eff.memory : (Known(act.peak_memory) && job.mem > 0 ? act.peak_memory / job.mem : null);
    const gpu_eff = Known(eff.gpu) ? eff.gpu : (job.gpus > 0 && Known(act.gpu_util) ? act.gpu_util / 100 : null);
    const time_eff = Known(eff.time) ? eff.time : (job.time_limit_s > 0 && Known(act.elapsed) ? act.elapsed / job.time_limit_s : null);
    const has_gpu = job.gpus > 0 || Known(act.gpu_memory) || Known(act.gpu_util);
    const gpu_mem_cap = (detail.limits || {}).gpu_memory_bytes;
    return `<div class="card"><dl class="facts" data-testid="job-facts">
        <dt>Cluster</dt><dd>${Txt(job.cluster)}</dd>
        <dt>User</dt><dd data-testid="job-user">${Txt(job.user)}</dd>
        <dt>Account</dt><dd>${Txt(job.account)}</dd>
        <dt>Name</dt><dd>${Txt(job.name)}</dd>
        <dt>Partition</dt><dd>${Txt(job.partition)}</dd>
        <dt>State</dt><dd data-testid="job-state">${StateBadge(job.state)}${OutcomeHtml(detail, job, live)}
          ${live ? '<span class="live" data-testid="live">live</span>' : ''}</dd>
        <dt>Submitted</dt><dd>${FmtTime(job.submit)}</dd>
        <dt>Started</dt><dd>${FmtTime(job.start)}</dd>
        <dt>Ended</dt><dd>${live ? 'still running' : FmtTime(job.end)}</dd>
        ${job.node_list ? `<dt>Nodes</dt><dd class="mono">${Esc(job.node_list)}</dd>` : ''}
      </dl></div>
      <div class="card"><div class="table-wrap"><table data-testid="job-usage">
        <thead><tr><th scope="col">Resource</th><th scope="col" class="num">Requested</th><th scope="col" class="num">Allocated</th>
          <th scope="col" class="num">Used</th><th scope="col" class="num">Efficiency</th></tr></thead>
        <tbody>
          <tr><th scope="row">CPU cores <span class="muted">(mean)</span></th><td class="num">${FmtCores(job.req_cpus)}</td><td class="num">${FmtCores(job.cpus)}</td><td class="num">${FmtCores(act.cpu_cores)}${so_far}</td><td class="num">${EffBadge(cpu_eff)}</td></tr>
          <tr><th scope="row">Memory <span class="muted">(peak)</span></th><td class="num">${FmtBytes(job.req_mem)}</td><td class="num">${FmtBytes(job.mem)}</td><td class="num">${FmtBytes(act.peak_memory)}${so_far}</td><td class="num">${EffBadge(mem_eff)}</td></tr>
          ${has_gpu ? `<tr><th scope="row">GPUs <span class="muted">(utilisation)</span></th><td class="num">${FmtNumber(job.req_gpus)}</td><td class="num">${FmtNumber(job.gpus)}${job.gpu_type ? ` <span class="muted">${Esc(job.gpu_type)}</span>` : ''}</td><td class="num">${Known(act.gpu_util) ? `${FmtNumber(act.gpu_util, 0)}%` : kDash}${so_far}</td><td class="num">${EffBadge(gpu_eff)}</td></tr>
          <tr><th scope="row">GPU memory <span class="muted">(peak)</span></th><td class="num">${kDash}</td><td class="num">${FmtBytes(gpu_mem_cap)}</td><td class="num">${FmtBytes(act.gpu_memory)}${so_far}</td><td class="num">${EffBadge(Known(act.gpu_memory) && gpu_mem_cap > 0 ? act.gpu_memory / gpu_mem_cap : null)}</td></tr>` : ''}
          <tr><th scope="row">Time</th><td class="num">${job.time_limit_s ? FmtDuration(job.time_limit_s) : kDash}</td><td class="num">${job.time_limit_s ? FmtDuration(job.time_limit_s) : kDash}</td><td class="num">${FmtDuration(act.elapsed)}${so_far}</td><td class="num">${EffBadge(time_eff)}</td></tr>
          ${Known(job.io_read) || Known(job.io_write) ? `<tr><th scope="row">I/O</th><td class="num">${kDash}</td><td class="num">${kDash}</td><td class="num">read ${FmtBytes(job.io_read)}, written ${FmtBytes(job.io_write)}</td><td class="num">${kDash}</td></tr>` : ''}
          ${EnergyRowHtml(detail.energy, so_far)}
        </tbody></table></div></div>`;
  }

  // What ended the job, in the card's words ("exit 1", "hit its 02:00:00 time limit"): SLURM
  // records exit 0 for a job it stopped, so the exit code alone would say a timeout succeeded.
  function OutcomeHtml(detail, job, live) {
    if (live) return '';
    const card = detail.card;
    const text = card ? card.outcome_text : (Known(job.exit_code) ? `exit ${job.exit_code}` : null);
    return Known(text) ? ` <span class="muted" data-testid="job-outcome">${Esc(text)}</span>` : '';
  }

  // The job card's advice and cost (GET /api/v1/jobs/…'s "card", the one `rightsize job`
  // prints): the flags to submit with next time, what the job cost and how much of it was unused.
  function AdviceHtml(card, running) {
    const advice = card.advice || [];
    const cost = card.cost || {};
    const flags = [
      Known((card.cpu || {}).suggested_cores) ? `-c ${card.cpu.suggested_cores}` : null,
      (card.memory || {}).suggested_flag,
      Known((card.gpu || {}).suggested_gpus) ? `--gpus=${card.gpu.suggested_gpus}` : null,
      (card.time || {}).suggested_flag,
    ].filter(Known);
    const cur = cost.currency || currency;
    let cost_line = '';
    if (Known(cost.allocated_dollars) && cost.allocated_dollars >= 0.005) {
      cost_line = `<p data-testid="job-cost">${running ? 'So far, at' : 'At'} list prices this job cost <strong>${FmtDollars(cost.allocated_dollars, cur)}</strong>`;
      if (Known(cost.wasted_dollars)) cost_line += `, <strong data-testid="job-unused">${FmtDollars(cost.wasted_dollars, cur)} unused</strong>`;
      cost_line += '.</p>';
    }
    if (!advice.length && !cost_line) return '';
    return `<div class="card" data-testid="job-advice"${card.stopped_at_limit ? ` data-stopped-at="${Esc(card.stopped_at_limit)}"` : ''}>
      ${cost_line}
      ${flags.length ? `<p>Next time ask for: ${flags.map((f) => `<code data-testid="job-flag">${Esc(f)}</code>`).join(' ')}</p>` : ''}
      ${advice.length ? `<ul class="summary-list">${advice.map((a) => `<li data-testid="advice-item">${Esc(a)}</li>`).join('')}</ul>` : ''}
    </div>`;
  }

  function PredictionHtml(pred, act) {
    const targets = (pred && pred.targets) || {};
    const names = Object.keys(targets);
    if (names.length === 0) return '<p class="muted">The prediction has no targets.</p>';
    const rows = names.map((name) => {
      const t = targets[name] || {};
      const spec = kTargets[name] || { label: name, fmt: (v) => FmtNumber(v, 2) };
      const actual = act[name];
      let verdict = kDash;
      if (Known(actual) && !act.running) {
        if (Known(t.p10) && actual < t.p10) verdict = 'below p10';
        else if (Known(t.p90) && actual > t.p90) verdict = 'above p90';
        else if (Known(t.p10) || Known(t.p90)) verdict = 'within p10–p90';
      }
      return `<tr data-testid="prediction-row" data-target="${Esc(name)}"><th scope="row">${Esc(spec.label)}</th>
        <td class="num">${spec.fmt(t.request)}</td><td class="num">${spec.fmt(t.p10)}</td><td class="num">${spec.fmt(t.p50)}</td>
        <td class="num">${spec.fmt(t.p90)}</td><td class="num">${spec.fmt(t.suggested_request)}</td>
        <td class="num"><strong>${spec.fmt(actual)}</strong>${act.running && Known(actual) ? ' <span class="muted">so far</span>' : ''}</td>
        <td>${Esc(verdict)}</td><td class="muted">${Esc(t.source ?? '')}</td></tr>`;
    }).join('');
    const notes = [...(pred.warnings || []), ...(pred.notes || [])]
      .map((n) => (typeof n === 'string' ? n : n.message || JSON.stringify(n)));
    return `<div class="table-wrap"><table data-testid="prediction-table">
      <thead><tr><th scope="col">Target</th><th scope="col" class="num">Request</th><th scope="col" class="num">p10</th><th scope="col" class="num">p50</th>
        <th scope="col" class="num">p90</th><th scope="col" class="num">Suggested</th><th scope="col" class="num">Actual</th><th scope="col">Outcome</th><th scope="col">Source</th></tr></thead>
      <tbody>${rows}</tbody></table></div>
      ${notes.length ? `<ul class="summary-list muted">${notes.map((n) => `<li>${Esc(n)}</li>`).join('')}</ul>` : ''}`;
  }

  function DiagnosisHtml(diag) {
    const evidence = diag.evidence || [];
    const fixes = diag.fixes || [];
    return `<div class="card" data-testid="diagnosis">
      <p><strong data-testid="diagnosis-class">${Esc(diag.class ?? 'unknown')}</strong>
        <span class="muted">confidence ${FmtPct(diag.confidence)}</span></p>
      <p>${Esc(diag.summary ?? '')}</p>
      ${diag.why ? `<p class="muted">${Esc(diag.why)}</p>` : ''}
      ${evidence.length ? `<h3>Evidence</h3><ol class="evidence">${evidence.map((e) => `<li>
        <span class="mono">${Esc(e.file ?? '')}${e.line ? `:${Esc(e.line)}` : ''}</span>
        ${e.signature ? `<span class="muted">(${Esc(e.signature)})</span>` : ''}<pre>${Esc(e.text ?? '')}</pre></li>`).join('')}</ol>` : ''}
      ${fixes.length ? `<h3>Fixes</h3><ul class="evidence">${fixes.map((f) => `<li><span class="fix-kind">${Esc(f.kind ?? 'fix')}</span>${Esc(f.text ?? '')}
        ${f.change ? `<pre>${Esc(f.change.file ?? '')}${f.change.line ? `:${Esc(f.change.line)}` : ''}: ${Esc(f.change.from ?? '')} → ${Esc(f.change.to ?? '')}</pre>` : ''}</li>`).join('')}</ul>` : ''}
    </div>`;
  }

  // The job's phases (GET /api/v1/jobs/…/phases, the document `rightsize job` prints from):
  // one row per phase with its use and the request a step of its own would make, and what
  // splitting the job into chained steps would free. Nothing when the job is one phase.
  function PhasesHtml(doc) {
    const phases = (doc && doc.phases) || [];
    if (phases.length < 2) return '';
    const split = doc.split || {};
    const use = (p, m, k) => ((p.use || {})[m] || {})[k];
    const rows = phases.map((p, i) => `<tr data-testid="phase-row">
        <th scope="row">${i + 1}</th><td class="num">${FmtDuration(p.start_s)}</td><td class="num">${FmtDuration(p.end_s - p.start_s)}</td>
        <td class="num">${FmtCores(use(p, 'cpu_cores', 'mean'))}</td><td class="num">${FmtBytes(use(p, 'memory_bytes', 'peak'))}</td>
        <td class="num">${FmtCores(p.step_cores)}, ${FmtBytes(p.step_memory_bytes)}</td>
        <td class="num">${FmtNumber(p.idle_core_s / 3600, 2)} core-h</td></tr>`).join('');
    const gib_h = (split.freed_memory_byte_s || 0) / 3600 / (1024 * 1024 * 1024);
    return `<div class="card"><div class="table-wrap"><table data-testid="phases-table">
      <thead><tr><th scope="col">Phase</th><th scope="col" class="num">From</th><th scope="col" class="num">Lasted</th>
        <th scope="col" class="num">CPU cores (mean)</th><th scope="col" class="num">Memory (peak)</th>
        <th scope="col" class="num">A step of its own would ask</th><th scope="col" class="num">Reserved, unused</th></tr></thead>
      <tbody>${rows}</tbody></table></div>
      <p data-testid="phases-split">As ${phases.length} chained steps, each asking for its own phase's use:
        <strong>${FmtNumber((split.freed_core_s || 0) / 3600, 2)} core-hours</strong> and
        <strong>${FmtNumber(gib_h, 2)} GiB-hours</strong> of the reservation freed, for
        ${FmtNumber(split.extra_queue_waits || 0)} more queue wait${split.extra_queue_waits === 1 ? '' : 's'}.</p></div>`;
  }

  async function PageJob(ctx, cluster, id) {
    const base = `/api/v1/jobs/${encodeURIComponent(cluster)}/${encodeURIComponent(id)}`;
    ctx.what = `job ${id} on ${cluster}`;
    SetPage(`Job ${id}`, `<h1 data-testid="job-title">Job <span data-testid="job-id">${Esc(id)}</span> <span class="muted">on ${Esc(cluster)}</span></h1>
      <div id="page-body">
        <div class="job-head" id="job-head"><p class="muted" data-testid="loading">Loading…</p></div>
        <section id="advice-section" hidden><h2>What to ask for next time</h2><div id="advice"></div></section>
        <h2>Usage over time</h2>
        <div class="charts" id="job-charts"></div>
        <p class="muted" id="charts-note"></p>
        <section id="prediction-section" hidden><h2>Predicted at submission vs what happened</h2><div id="prediction"></div></section>
        <section id="phases-section" hidden><h2>Phases: where the reservation sat idle</h2><div id="phases"></div></section>
        <section id="diagnosis-section" hidden><h2>Diagnosis</h2><div id="diagnosis"></div></section>
        <section id="flame-section" hidden><h2>Where the CPU time went</h2><div class="card"><div data-testid="flamegraph" id="flamegraph"></div></div></section>
      </div>`);

    const head = view.querySelector('#job-head');
    const charts = new JobCharts(view.querySelector('#job-charts'), ctx);
    const note = view.querySelector('#charts-note');
    let detail = await Api(base, ctx);
    if (!ctx.alive()) return;
    let job = NormJob(detail.job);
    const running = () => job.state === 'RUNNING';

    const render_head = () => {
      const act = Actuals(job, charts, running());
      head.innerHTML = JobHeadHtml(detail, job, act);
      const advice = detail.card ? AdviceHtml(detail.card, running()) : '';
      view.querySelector('#advice-section').hidden = !advice;
      view.querySelector('#advice').innerHTML = advice;
      if (detail.prediction) {
        view.querySelector('#prediction-section').hidden = false;
        view.querySelector('#prediction').innerHTML = PredictionHtml(detail.prediction, act);
      }
    };
    const render_diagnosis = () => {
      if (!detail.diagnosis) return;
      view.querySelector('#diagnosis-section').hidden = false;
      view.querySelector('#diagnosis').innerHTML = DiagnosisHtml(detail.diagnosis);
    };
    render_head();
    render_diagnosis();

    // Series: the whole job first, then (while it runs) from the last time seen every 2 s.
    try {
      const first = await Api(`${base}/series`, ctx);
      if (!ctx.alive()) return;
      detail.limits = first.limits || {};
      charts.Add(first);
      if (charts.lastTime === null) note.textContent = 'No samples were recorded for this job (only its final record).';
      render_head();
    } catch (e) {
      if (e.name === 'AbortError') return;
      ShowError(note, e, 'the usage series');
    }

    // Phases, once the job has ended (a running job's would move under the reader).
    const load_phases = async () => {
      if ((detail.metrics || []).length === 0) return;
      const data = await Api(`${base}/phases`, ctx);
      if (!ctx.alive()) return;
      const html = PhasesHtml(data.phases);
      view.querySelector('#phases-section').hidden = !html;
      view.querySelector('#phases').innerHTML = html;
    };
    if (!running()) {
      try {
        await load_phases();
      } catch (e) {
        if (e.name === 'AbortError') return;
        view.querySelector('#phases-section').hidden = false;
        ShowError(view.querySelector('#phases'), e, 'the phases');
      }
    }

    // Flame graph.
    let flame = null;
    const load_stacks = async () => {
      const data = await Api(`${base}/stacks?format=json`, ctx);
      if (!ctx.alive()) return;
      const stacks = data.stacks || {};
      if (!flame && Object.keys(stacks).length === 0) return;
      view.querySelector('#flame-section').hidden = false;
      if (!flame) {
        flame = new window.FlameGraph(view.querySelector('#flamegraph'));
        ctx.onLeave(() => flame.Destroy());
      }
      flame.setStacks(stacks);
    };
    if (detail.has_stacks !== false || running()) {
      try {
        await load_stacks();
      } catch (e) {
        if (e.name === 'AbortError') return;
        view.querySelector('#flame-section').hidden = false;
        ShowError(view.querySelector('#flamegraph'), e, 'the call stacks');
      }
    }

    if (!running()) return;
    const stop_series = ctx.every(2000, async () => {
      const from = charts.lastTime;
      const q = from === null ? '' : `?from=${encodeURIComponent(from)}`;
      const resp = await Api(`${base}/series${q}`, ctx);
      if (!ctx.alive()) return;
      Object.assign(detail.limits, resp.limits || {});
      charts.Add(resp);
      note.textContent = '';
      render_head();
    });
    const stop_detail = ctx.every(5000, async () => {
      detail = Object.assign(await Api(base, ctx), { limits: detail.limits });
      if (!ctx.alive()) return;
      job = NormJob(detail.job);
      if (flame || detail.has_stacks) await load_stacks();
      if (!running()) {
        // The job ended: one last look at its series, then stop polling.
        stop_series();
        stop_detail();
        charts.Add(await Api(`${base}/series${charts.lastTime === null ? '' : `?from=${charts.lastTime}`}`, ctx));
        await load_phases();
      }
      render_head();
      render_diagnosis();
    });
  }

  // ---------------------------------------------------------------- #/report
  const kGroupings = ['user', 'account', 'partition', 'gpu-type', 'job-name'];
  const kResources = [
    { key: 'cpu', label: 'CPU', unit: 'core_hours', unit_label: 'core-hours', recoverable: 'core_hours' },
    { key: 'memory', label: 'Memory', unit: 'gb_hours', unit_label: 'GiB-hours', recoverable: 'gb_hours' },
    { key: 'gpu', label: 'GPU', unit: 'gpu_hours', unit_label: 'GPU-hours', recoverable: 'gpu_hours' },
    { key: 'gpu_memory', label: 'GPU memory', unit: 'gb_hours', unit_label: 'GiB-hours', recoverable: null },
  ];

  // The report's "what the queue would have done" (docs/report-schema.md `queue`): the users'
  // limits against right-sized ones, through the simulator; admins' reports only.
  function QueueHtml(q) {
    if (!q) return '';
    if (!q.simulated) return `<h2>What the queue would have done</h2><p class="muted" data-testid="report-queue">Not simulated: ${Esc(q.why_not || '')}.</p>`;
    const row = (label, m) => `<tr><th scope="row">${label}</th><td class="num">${FmtDuration(m.mean_wait_s)}</td><td class="num">${FmtDuration(m.p95_wait_s)}</td>
      <td class="num">${FmtNumber(m.avebsld, 2)}</td><td class="num">${FmtNumber(m.killed)}</td><td class="num">${FmtHours(m.lost_core_hours)}</td></tr>`;
    return `<h2>What the queue would have done</h2>
      <p class="muted">${FmtNumber(q.jobs)} jobs replayed through ${Esc((q.policy || '').toUpperCase())} on ${FmtNumber(q.machine_cpus)} CPUs; ${FmtNumber(q.right_sized)} limits right-sized.</p>
      <div class="table-wrap"><table data-testid="report-queue">
        <thead><tr><th scope="col">Limits</th><th scope="col" class="num">Mean wait</th><th scope="col" class="num">p95 wait</th><th scope="col" class="num">AVEbsld</th>
          <th scope="col" class="num">Killed</th><th scope="col" class="num">Lost core-h</th></tr></thead>
        <tbody>${row("users'", q.before || {})}${row('right-sized', q.after || {})}</tbody></table></div>
      ${q.rule ? `<p class="muted">${Esc(q.rule)}</p>` : ''}`;
  }

  function ReportHtml(r, by) {
    const cost = r.cost || {};
    currency = cost.currency || 'USD';
    const w = r.window || {};
    const rec = r.recoverable || {};
    const ub = rec.upper_bound || {};
    const hp = rec.history_policy || {};
    const totals = kResources.map((res) => {
      const x = r[res.key];
      if (!x) return '';
      const u = res.unit;
      return `<tr data-resource="${res.key}"><th scope="row">${res.label} <span class="muted">(${res.unit_label})</span></th>
        <td class="num">${FmtHours(x[`allocated_${u}`])}</td><td class="num">${FmtHours(x[`used_${u}`])}</td>
        <td class="num">${FmtHours(x[`wasted_${u}`])}</td><td class="num">${EffBadge(x.efficiency)}</td>
        <td class="num">${res.recoverable ? FmtHours(ub[res.recoverable]) : kDash}</td>
        <td class="num">${res.recoverable ? FmtHours(hp[res.recoverable]) : kDash}</td>
        <td class="num">${FmtDollars(x.allocated_dollars)}</td><td class="num">${FmtDollars(x.used_dollars)}</td>
        <td class="num">${FmtDollars(x.wasted_dollars)}</td></tr>`;
    }).join('');
    const t = r.time || {};
    const groups = r.groups || r.top_wasters || [];
    const link_key = by === 'user' || by === 'account';
    const kShownGroups = 50;
    const group_rows = groups.map((g, i) => `<tr data-testid="group-row"${i >= kShownGroups ? ' hidden' : ''}>
      <th scope="row">${link_key && g.key && !g.key.startsWith('(') ? `<a href="#/jobs?${by}=${encodeURIComponent(g.key)}">${Esc(g.key)}</a>` : Esc(g.key ?? '(unknown)')}</th>
      <td class="num">${FmtNumber(g.jobs)}</td><td class="num">${FmtHours(g.wasted_core_hours)}</td><td class="num">${FmtHours(g.wasted_gb_hours)}</td>
      <td class="num">${FmtHours(g.wasted_gpu_hours)}</td><td class="num">${FmtDollars(g.wasted_dollars)}</td><td class="num">${FmtDollars(g.allocated_dollars)}</td>
      <td class="num">${EffBadge(g.cpu_efficiency)}</td><td class="num">${EffBadge(g.memory_efficiency)}</td><td class="num">${EffBadge(g.gpu_efficiency)}</td></tr>`).join('');
    const window_text = `${w.since ? FmtTime(w.since) : (w.first_end ? FmtTime(w.first_end) : kDash)} – ${w.until ? FmtTime(w.until) : 'now'}`;
    return `<section data-testid="report">
      <p class="muted" data-testid="report-window">Jobs that ended ${Esc(window_text)}${Known(w.days) ? ` (${FmtNumber(w.days, w.days % 1 ? 1 : 0)} days)` : ''}:
        <strong data-testid="report-jobs">${FmtNumber(r.jobs)}</strong> jobs${(r.clusters || []).length ? ` on ${Esc(r.clusters.join(', '))}` : ''}.</p>
      ${(r.summary || []).length ? `<div class="card"><ul class="summary-list">${r.summary.map((s) => `<li>${Esc(s)}</li>`).join('')}</ul></div>` : ''}
      <div class="kpis">
        <div class="kpi"><span class="v" data-testid="report-wasted-dollars">${FmtDollars(cost.wasted_dollars)}</span><span class="l">wasted (jobs with usage)</span></div>
        <div class="kpi"><span class="v">${FmtDollars(cost.allocated_dollars)}</span><span class="l">allocated</span></div>
        <div class="kpi"><span class="v">${FmtDollars(cost.used_dollars)}</span><span class="l">used</span></div>
        <div class="kpi"><span class="v">${FmtDollars(cost.recoverable_upper_bound_dollars)}</span><span class="l">recoverable, upper bound</span></div>
        <div class="kpi"><span class="v">${FmtDollars(cost.recoverable_history_policy_dollars)}</span><span class="l">recoverable with history-based requests</span></div>
      </div>
      <h2>Totals</h2>
      <div class="table-wrap"><table data-testid="report-totals">
        <thead><tr><th scope="col">Resource</th><th scope="col" class="num">Allocated</th><th scope="col" class="num">Used</th><th scope="col" class="num">Wasted</th>
          <th scope="col" class="num">Efficiency</th><th scope="col" class="num">Recoverable (upper bound)</th><th scope="col" class="num">Recoverable (history policy)</th>
          <th scope="col" class="num">Allocated $</th><th scope="col" class="num">Used $</th><th scope="col" class="num">Wasted $</th></tr></thead>
        <tbody>${totals}
          <tr data-resource="time"><th scope="row">Time <span class="muted">(hours)</span></th><td class="num">${FmtHours(t.requested_hours)}</td><td class="num">${FmtHours(t.elapsed_hours)}</td>
            <td class="num">${Known(t.requested_hours) && Known(t.elapsed_hours) ? FmtHours(t.requested_hours - t.elapsed_hours) : kDash}</td><td class="num">${EffBadge(t.efficiency)}</td>
            <td class="num">${kDash}</td><td class="num">${kDash}</td><td class="num">${kDash}</td><td class="num">${kDash}</td><td class="num">${kDash}</td></tr>
        </tbody></table></div>
      ${ub.rule || hp.rule ? `<ul class="summary-list muted">${ub.rule ? `<li>${Esc(ub.rule)}</li>` : ''}${hp.rule ? `<li>${Esc(hp.rule)}</li>` : ''}</ul>` : ''}
      ${cost.prices_source ? `<p class="muted">Prices: ${Esc(cost.prices_source)}</p>` : ''}
      <h2>By ${Esc(r.by || by)}</h2>
      ${groups.length === 0 ? '<p class="muted">No groups.</p>' : `<div class="table-wrap"><table data-testid="report-groups">
        <thead><tr><th scope="col">${Esc(r.by || by)}</th><th scope="col" class="num">Jobs</th><th scope="col" class="num">Wasted core-h</th><th scope="col" class="num">Wasted GiB-h</th>
          <th scope="col" class="num">Wasted GPU-h</th><th scope="col" class="num">Wasted $</th><th scope="col" class="num">Allocated $</th>
          <th scope="col" class="num">CPU eff.</th><th scope="col" class="num">Mem. eff.</th><th scope="col" class="num">GPU eff.</th></tr></thead>
        <tbody>${group_rows}</tbody></table></div>
        ${groups.length > kShownGroups ? `<div class="pager"><button type="button" id="groups-all">Show all ${FmtNumber(groups.length)} groups</button></div>` : ''}`}
      ${QueueHtml(r.queue)}
    </section>`;
  }

  async function PageReport(ctx, params) {
    const by = kGroupings.includes(params.get('by')) ? params.get('by') : 'user';
    const v = (k) => Esc(params.get(k) || '');
    SetPage('Report', `<h1>Waste report</h1>
      <form class="controls" id="report-controls" aria-label="Report window and grouping">
        <label for="report-since">Ended since (UTC day)<input id="report-since" name="since" type="date" value="${v('since')}"></label>
        <label for="report-until">Until (UTC day, included)<input id="report-until" name="until" type="date" value="${v('until')}"></label>
        <label for="report-cluster">Cluster<input id="report-cluster" name="cluster" value="${v('cluster')}" autocomplete="off"></label>
        <label for="report-by">Group by<select id="report-by" name="by">${kGroupings.map((g) => `<option value="${g}"${g === by ? ' selected' : ''}>${g}</option>`).join('')}</select></label>
        <button class="primary" type="submit" id="report-apply">Apply</button>
        <span class="muted">Without dates: the last 14 days, or the 14 days up to the last job that ended when none ended in them.</span>
      </form>
      <div id="page-body"><p class="muted" data-testid="loading">Loading…</p></div>`);
    const form = view.querySelector('#report-controls');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const k of ['since', 'until', 'cluster', 'by']) {
        const val = form.elements.namedItem(k).value.trim();
        if (val) q.set(k, val);
      }
      const hash = `#/report?${q}`;
      if (location.hash === hash) Route(); else location.hash = hash;
    });
    const q = new URLSearchParams({ by });
    const since = DayToUnix(params.get('since'));
    const until = DayToUnix(params.get('until'));
    if (since !== null) q.set('since', String(since));
    if (until !== null) q.set('until', String(until + 86400));
    if (params.get('cluster')) q.set('cluster', params.get('cluster'));
    ctx.what = 'the report';
    const report = await Api(`/api/v1/report?${q}`, ctx);
    if (!ctx.alive()) return;
    const window_note = (report.window || {}).note;
    view.querySelector('#page-body').innerHTML = (window_note
      ? `<p class="notice" data-testid="report-window-note">${Esc(window_note[0].toUpperCase() + window_note.slice(1))}.</p>` : '') + ReportHtml(report, by);
    const all = view.querySelector('#groups-all');
    if (all) {
      all.addEventListener('click', () => {
        for (const tr of view.querySelectorAll('tr[data-testid="group-row"][hidden]')) tr.hidden = false;
        all.remove();
      });
    }
  }

  // ---------------------------------------------------------------- start
  window.addEventListener('hashchange', Route);
  Route();
  // The header's right side: who the server says we are (from the overview) and its version.
  function ShowWho() {
    const who = document.getElementById('who');
    who.textContent = [who.dataset.user, who.dataset.version].filter(Boolean).join(' · ');
  }
  fetch('/healthz', { cache: 'no-store' }).then((r) => r.json()).then((h) => {
    if (h && h.version) {
      document.getElementById('who').dataset.version = `rightsize ${h.version}${Known(h.jobs) ? `, ${FmtNumber(h.jobs)} jobs stored` : ''}`;
      ShowWho();
    }
  }).catch(() => { /* the pages report connection problems themselves */ });

  // For tests and debugging in the console.
  window.rightsize = { FmtBytes, FmtPct, FmtDollars, FmtCores, MergePoints };
})();
