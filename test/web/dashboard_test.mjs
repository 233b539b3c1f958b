// Browser test of the dashboard served by `rightsize serve` (web/src/, docs/api.md).
//
// playwright-core is resolved from web/node_modules through createRequire on web/package.json
// (else from the build tree's copy, $RIGHTSIZE_WEB_BUILD or build/web, where CMake runs npm ci),
// so this runs from any working directory once `npm ci --prefix web` has run:
//
//   BASE_URL=http://127.0.0.1:8080 JOB_CLUSTER=gpu1 JOB_ID=123 HOT_FUNCTION=matmul \
//   SCREENSHOT_DIR=/tmp/shots node test/web/dashboard_test.mjs
//
// It drives Debian's Chromium (/usr/bin/chromium, or $CHROMIUM), headless, and checks what a
// user would notice: the overview shows at least one running job; the job list lists the job
// and its user filter works; the job page shows the job, its CPU and memory charts have points
// and gain more within ~10 s (live update); the flame graph names HOT_FUNCTION; the report
// renders. It writes overview.png, jobs.png, job.png and report.png to SCREENSHOT_DIR and prints
// the first contentful paint of `/` (no assertion on time). Exit 0 on success, 1 with a message
// naming the failed check.
//
// The job must be RUNNING and receive telemetry while the test runs, or the live-update check
// fails. Either something else feeds it, or set FEED_TELEMETRY=1: the test then re-posts the
// job's own record with new cpu_cores and memory_bytes samples every second (as agent
// "dashboard-test-<pid>"; AGENT_TOKEN if the server wants one). USER_TOKEN, when set, is sent as
// the people's bearer token on every browser request.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { LoadPlaywright } from './playwright.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { chromium } = LoadPlaywright('dashboard_test');

const env = process.env;
const base_url = (env.BASE_URL || '').replace(/\/+$/, '');
const job_cluster = env.JOB_CLUSTER || '';
const job_id = env.JOB_ID || '';
const hot_function = env.HOT_FUNCTION || '';
const screenshot_dir = env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'rightsize-dashboard-shots');
const kLiveTimeoutMs = 12000;

class CheckFailed extends Error {}
function Fail(msg) { throw new CheckFailed(msg); }
function Log(msg) { console.log(`dashboard_test: ${msg}`); }

for (const [name, value] of [['BASE_URL', base_url], ['JOB_CLUSTER', job_cluster], ['JOB_ID', job_id], ['HOT_FUNCTION', hot_function]]) {
  if (!value) {
    console.error(`dashboard_test: ${name} is not set (need BASE_URL, JOB_CLUSTER, JOB_ID, HOT_FUNCTION; SCREENSHOT_DIR optional)`);
    process.exit(1);
  }
}
mkdirSync(screenshot_dir, { recursive: true });

// Waits until `selector` is present, or fails with the text of a dashboard error message.
async function WaitFor(page, selector, what, timeout = 15000) {
  const found = await page.waitForSelector(`${selector}, [data-testid="error"]`, { timeout, state: 'attached' })
    .catch(() => null);
  if (!found) Fail(`${what}: nothing appeared within ${timeout / 1000} s (waited for ${selector})`);
  const error = await page.$('[data-testid="error"]');
  if (error && !(await page.$(selector))) Fail(`${what}: the page shows an error: ${(await error.innerText()).trim()}`);
  return page.$(selector);
}

async function Shot(page, name) {
  const file = path.join(screenshot_dir, name);
  await page.screenshot({ path: file, fullPage: true });
  Log(`screenshot ${file}`);
}

// FEED_TELEMETRY=1: posts the job's own record with fresh samples every second.
function StartFeeder(record) {
  const agent = `dashboard-test-${process.pid}`;
  let seq = Date.now();
  let stopped = false;
  const headers = { 'Content-Type': 'application/json' };
  if (env.AGENT_TOKEN) headers.Authorization = `Bearer ${env.AGENT_TOKEN}`;
  const tick = async () => {
    if (stopped) return;
    const t = Date.now() / 1000;
    const body = {
      schema: 'rightsize.telemetry/v1', agent, seq: ++seq,
      jobs: [{ job: record, samples: {
        cpu_cores: [[t, 2 + Math.random()]], memory_bytes: [[t, 1e9 + Math.random() * 1e8]],
      } }],
    };
    try {
      const r = await fetch(`${base_url}/api/v1/telemetry`, { method: 'POST', headers, body: JSON.stringify(body) });
      if (!r.ok) Log(`feeder: telemetry answered ${r.status}: ${(await r.text()).slice(0, 200)}`);
    } catch (e) {
      Log(`feeder: ${e.message}`);
    }
  };
  const timer = setInterval(tick, 1000);
  tick();
  return () => { stopped = true; clearInterval(timer); };
}

async function Main() {
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--no-sandbox'],
  });
  const page_errors = [];
  let stop_feeder = () => {};
  try {
    const context = await browser.newContext({
      viewport: { width: 1400, height: 1000 },
      extraHTTPHeaders: env.USER_TOKEN ? { Authorization: `Bearer ${env.USER_TOKEN}` } : {},
    });
    const page = await context.newPage();
    page.on('pageerror', (e) => page_errors.push(e.message));

    // First paint of `/`, before and independent of the data.
    await page.goto(`${base_url}/`, { waitUntil: 'load' });
    const fcp_ms = await page.evaluate(() => new Promise((resolve) => {
      const entry = performance.getEntriesByName('first-contentful-paint')[0];
      if (entry) return resolve(entry.startTime);
      new PerformanceObserver((list) => {
        const e = list.getEntriesByName('first-contentful-paint')[0];
        if (e) resolve(e.startTime);
      }).observe({ type: 'paint', buffered: true });
      setTimeout(() => resolve(null), 5000);
    }));
    Log(`first contentful paint of /: ${fcp_ms === null ? 'not reported' : `${fcp_ms.toFixed(1)} ms`}`);

    // Overview: at least one running job.
    await WaitFor(page, '[data-testid="running-jobs"]', 'overview');
    const running = await page.$$eval('[data-testid="running-jobs"]',
      (els) => els.reduce((s, el) => s + Number(el.dataset.value || 0), 0));
    if (!(running >= 1)) Fail(`overview: expected at least 1 running job, it shows ${running}`);
    Log(`overview: ${running} running job(s)`);
    await Shot(page, 'overview.png');

    // Job list: the job is listed; the user filter narrows the list.
    const row_sel = `tr[data-testid="job-row"][data-cluster="${CSS_Escape(job_cluster)}"][data-job-id="${CSS_Escape(job_id)}"]`;
    await page.goto(`${base_url}/#/jobs?cluster=${encodeURIComponent(job_cluster)}`);
    await WaitFor(page, '[data-testid="jobs-count"][data-count]', 'job list');
    if (!(await page.$(row_sel))) Fail(`job list: job ${job_cluster}/${job_id} is not on the first page of #/jobs?cluster=${job_cluster}`);
    const user = (await page.$eval(row_sel, (tr) => tr.cells[1].textContent)).trim();
    if (!user || user === '—') Fail(`job list: job ${job_id} has no user`);

    const nobody = `no-such-user-${process.pid}`;
    await page.fill('#filter-user', nobody);
    await page.click('#filter-apply');
    await WaitFor(page, '[data-testid="no-jobs"]', `job list filtered by user ${nobody}`);
    const rows_nobody = await page.$$eval('tr[data-testid="job-row"]', (r) => r.length);
    if (rows_nobody !== 0) Fail(`job list: filtering by user ${nobody} left ${rows_nobody} rows, expected 0`);
    if (!page.url().includes(`user=${nobody}`)) Fail(`job list: the filter is not in the URL (${page.url()})`);

    await page.fill('#filter-user', user);
    await page.click('#filter-apply');
    await WaitFor(page, row_sel, `job list filtered by user ${user}`);
    const rows_user = await page.$$eval('tr[data-testid="job-row"] td:nth-child(2)', (tds) => tds.map((t) => t.textContent.trim()));
    if (rows_user.some((u) => u !== user)) Fail(`job list: filtering by user ${user} shows other users' jobs: ${[...new Set(rows_user)].join(', ')}`);
    Log(`job list: job ${job_id} listed; user filter: 0 rows for ${nobody}, ${rows_user.length} for ${user}`);
    await Shot(page, 'jobs.png');

    // Job page, reached through the row's link.
    if (env.FEED_TELEMETRY) {
      const r = await fetch(`${base_url}/api/v1/jobs/${encodeURIComponent(job_cluster)}/${encodeURIComponent(job_id)}`,
        { headers: env.USER_TOKEN ? { Authorization: `Bearer ${env.USER_TOKEN}` } : {} });
      if (!r.ok) Fail(`feeder: could not read the job record (${r.status})`);
      stop_feeder = StartFeeder((await r.json()).job);
    }
    await page.click(`${row_sel} a[data-testid="job-link"]`);
    await WaitFor(page, '[data-testid="job-id"]', 'job page');
    const shown_id = (await page.textContent('[data-testid="job-id"]')).trim();
    if (shown_id !== job_id) Fail(`job page: shows job "${shown_id}", expected "${job_id}"`);
    await WaitFor(page, '[data-testid="job-facts"]', 'job page header');
    // Energy: kWh where measured, else "unknown" (this machine has no RAPL), never a made-up 0.
    await WaitFor(page, '[data-testid="job-energy"]', 'job page energy row');
    const energy = (await page.textContent('[data-testid="job-energy"]')).trim();
    if (!/Energy.*(unknown|[0-9] kWh)/s.test(energy)) Fail(`job page: energy row reads "${energy}"`);
    Log(`job page: energy row "${energy.replace(/\s+/g, ' ')}"`);

    const points = (metric) => page.$eval(`[data-testid="chart-${metric}"]`, (el) => Number(el.dataset.points || 0));
    for (const metric of ['cpu_cores', 'memory_bytes']) {
      await page.waitForFunction((m) => Number(document.querySelector(`[data-testid="chart-${m}"]`)?.dataset.points || 0) > 0,
        metric, { timeout: 15000 }).catch(() => Fail(`job page: the ${metric} chart has no data points after 15 s`));
    }
    const before = { cpu_cores: await points('cpu_cores'), memory_bytes: await points('memory_bytes') };
    Log(`job page: ${before.cpu_cores} CPU points, ${before.memory_bytes} memory points`);
    for (const metric of ['cpu_cores', 'memory_bytes']) {
      await page.waitForFunction(([m, n]) => Number(document.querySelector(`[data-testid="chart-${m}"]`)?.dataset.points || 0) > n,
        [metric, before[metric]], { timeout: kLiveTimeoutMs })
        .catch(() => Fail(`job page: the ${metric} chart did not gain points within ${kLiveTimeoutMs / 1000} s ` +
          `(still ${before[metric]}); is the job running and fed telemetry? (FEED_TELEMETRY=1 feeds it)`));
    }
    Log(`job page: live update: CPU ${before.cpu_cores} → ${await points('cpu_cores')} points, ` +
        `memory ${before.memory_bytes} → ${await points('memory_bytes')} points`);

    await page.waitForFunction((fn) => (document.querySelector('[data-testid="flamegraph"]')?.textContent || '').includes(fn),
      hot_function, { timeout: 15000 })
      .catch(async () => {
        const err = await page.$('[data-testid="flamegraph"] [data-testid="error"]');
        Fail(`job page: the flame graph does not contain "${hot_function}"${err ? `: ${(await err.innerText()).trim()}` : ''}`);
      });
    const frames = await page.$$eval('[data-testid="flamegraph"] g.frame', (gs) => gs.length);
    Log(`job page: flame graph of ${frames} frames names ${hot_function}`);
    await Shot(page, 'job.png');
    stop_feeder();

    // Report.
    await page.goto(`${base_url}/#/report`);
    await WaitFor(page, '[data-testid="report-totals"]', 'report');
    Log(`report: ${(await page.textContent('[data-testid="report-window"]')).replace(/\s+/g, ' ').trim()}`);
    await Shot(page, 'report.png');

    if (page_errors.length) Fail(`uncaught errors in the page: ${page_errors.join(' | ')}`);
  } finally {
    stop_feeder();
    await browser.close();
  }
}

// CSS.escape is a browser API; attribute values here only need quotes and backslashes escaped.
function CSS_Escape(s) { return String(s).replace(/["\\]/g, '\\$&'); }

Main().then(() => {
  Log('all checks passed');
}).catch((e) => {
  console.error(`dashboard_test: FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  process.exit(1);
});
