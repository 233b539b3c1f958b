// Browser test of the demo's store (scripts/demo-store.sh) served by `rightsize serve`, with one
// live job of the demo (scripts/demo_workload.py) watched by a real agent: every dashboard page
// a newcomer opens after `make demo` shows data (issue 28, "the first minute").
//
//   BASE_URL=http://127.0.0.1:8080 LIVE_CLUSTER=demo LIVE_JOB=1001 \
//   SCREENSHOT_DIR=/tmp/shots node test/web/demo_test.mjs
//
// Checks, in Debian's Chromium (headless, playwright-core as in dashboard_test.mjs):
//   - overview: a card per cluster; the clusters known only from history show the waste of the
//     7 days up to their last job and say so; the sacct export's old RUNNING rows are not counted
//     (habrok: 0 running) while the live job is; each card's count matches its RUNNING list;
//   - job list: rows; no job reads as running for years (the 2002 trace's UNKNOWN jobs, the
//     export's RUNNING rows, shown "not seen lately" with sacct's elapsed time at the export);
//   - job pages: the idle 8-GPU job of Alex (facts, no error); the live job (CPU and memory
//     charts with points, a flame graph with frames);
//   - report: without dates, the latest window with data and the note saying so; Alex's report
//     shows its 303 jobs; HPC2N's says what the queue would have done (users' and right-sized
//     limits).
// Screenshots: overview.png, jobs.png, jobs-hpc2n.png, job-alex.png, job-live.png, report.png,
// report-alex.png in SCREENSHOT_DIR. Exit 0 on success, 1 naming the failed check.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { LoadPlaywright } from './playwright.mjs';

const { chromium } = LoadPlaywright('demo_test');

const env = process.env;
const base_url = (env.BASE_URL || '').replace(/\/+$/, '');
const live_cluster = env.LIVE_CLUSTER || 'demo';
const live_job = env.LIVE_JOB || '';
const screenshot_dir = env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'rightsize-demo-shots');
if (!base_url || !live_job) {
  console.error('demo_test: BASE_URL and LIVE_JOB must be set (LIVE_CLUSTER, SCREENSHOT_DIR optional)');
  process.exit(1);
}
mkdirSync(screenshot_dir, { recursive: true });

class CheckFailed extends Error {}
function Fail(msg) { throw new CheckFailed(msg); }
function Log(msg) { console.log(`demo_test: ${msg}`); }

async function WaitFor(page, selector, what, timeout = 20000) {
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

// Days in an elapsed cell ("8845d 15h" -> 8845), 0 when it has none.
function Days(text) {
  const m = /^(\d+)d\b/.exec(text.trim());
  return m ? Number(m[1]) : 0;
}

async function JobRows(page, hash, what) {
  await page.goto(`${base_url}/${hash}`);
  await WaitFor(page, '[data-testid="jobs-count"][data-count]', what);
  return page.$$eval('tr[data-testid="job-row"]', (trs) => trs.map((tr) => ({
    id: tr.dataset.jobId,
    cluster: tr.dataset.cluster,
    state: tr.cells[4].textContent.trim(),
    elapsed: tr.cells[6].textContent.trim(),
  })));
}

async function Main() {
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--no-sandbox'],
  });
  const page_errors = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => page_errors.push(e.message));

    // ---- overview
    await page.goto(`${base_url}/`);
    await WaitFor(page, '[data-testid="cluster"]', 'overview');
    const cards = await page.$$eval('[data-testid="cluster"]', (els) => els.map((el) => ({
      cluster: el.dataset.cluster,
      running: Number(el.querySelector('[data-testid="running-jobs"]')?.dataset.value || 0),
      week: (el.querySelector('[data-testid="week-wasted"]')?.textContent || '').trim(),
      note: (el.querySelector('[data-testid="week-note"]')?.textContent || '').trim(),
    })));
    const card = (name) => cards.find((c) => c.cluster === name) || Fail(`overview: no card for cluster ${name} (cards: ${cards.map((c) => c.cluster).join(', ')})`);
    for (const name of ['alex', 'fritz', 'habrok', 'HPC2N']) {
      const c = card(name);
      if (!c.week || c.week === '—') Fail(`overview: cluster ${name} shows no waste for its last week with data ("${c.week}")`);
      if (!/^No jobs ended in the last 7 days; showing the 7 days up to \d{4}-\d\d-\d\d\.$/.test(c.note)) {
        Fail(`overview: cluster ${name} does not say which week it shows: "${c.note}"`);
      }
    }
    if (card('alex').note !== 'No jobs ended in the last 7 days; showing the 7 days up to 2023-02-10.') {
      Fail(`overview: alex's week should end with its last job, on 2023-02-10: "${card('alex').note}"`);
    }
    if (card('habrok').running !== 0) Fail(`overview: habrok's sacct export of 2024 is counted as ${card('habrok').running} running now`);
    if (!(card(live_cluster).running >= 1)) Fail(`overview: the live job is not counted as running (${card(live_cluster).running})`);
    const total = await page.$eval('[data-testid="running-total"]', (el) => Number(el.dataset.value));
    if (total !== cards.reduce((s, c) => s + c.running, 0)) Fail(`overview: ${total} running in total, the cards add up to another figure`);
    Log(`overview: ${cards.map((c) => `${c.cluster} ${c.running} running, week ${c.week}`).join('; ')}`);
    await Shot(page, 'overview.png');

    // Each card's running count is the length of the RUNNING list its link opens.
    for (const c of cards) {
      const rows = await JobRows(page, `#/jobs?cluster=${encodeURIComponent(c.cluster)}&state=RUNNING`, `running jobs of ${c.cluster}`);
      if (rows.length !== c.running) {
        // The live cluster may start or end a job between the two reads: read the card again.
        if (c.cluster !== live_cluster) Fail(`job list: ${rows.length} RUNNING rows for ${c.cluster}, its card says ${c.running} running`);
      }
    }

    // ---- job list
    const rows = await JobRows(page, '#/jobs', 'job list');
    if (rows.length === 0) Fail('job list: no jobs');
    const old = rows.filter((r) => Days(r.elapsed) > 365);
    if (old.length) Fail(`job list: ${old.map((r) => `${r.cluster}/${r.id} ${r.state} "${r.elapsed}"`).join(', ')} read as running for years`);
    const stale = rows.filter((r) => r.cluster === 'habrok' && r.state.startsWith('RUNNING'));
    if (stale.length === 0) Fail('job list: the habrok export\'s RUNNING rows are not on the first page');
    // Their elapsed time is sacct's, as of the export; it does not grow with the clock.
    if (!stale.every((r) => r.state.includes('not seen lately'))) {
      Fail(`job list: habrok's old RUNNING rows should read "not seen lately": ${JSON.stringify(stale)}`);
    }
    Log(`job list: ${rows.length} rows on the first page; ${stale.length} old RUNNING rows marked not seen lately`);
    await Shot(page, 'jobs.png');
    const unknown = (await JobRows(page, '#/jobs?cluster=HPC2N&state=UNKNOWN', 'HPC2N UNKNOWN jobs'));
    if (unknown.length === 0) Fail('job list: the HPC2N trace\'s UNKNOWN jobs are not listed');
    const years = unknown.filter((r) => Days(r.elapsed) > 365);
    if (years.length) Fail(`job list: HPC2N UNKNOWN jobs read as running for years: ${years.map((r) => `${r.id} "${r.elapsed}"`).join(', ')}`);
    Log(`job list: ${unknown.length} UNKNOWN jobs of the 2002 trace, elapsed ${[...new Set(unknown.map((r) => r.elapsed))].join(', ')}`);
    await Shot(page, 'jobs-hpc2n.png');

    // ---- job pages
    await page.goto(`${base_url}/#/job/alex/679909`);
    await WaitFor(page, '[data-testid="job-facts"]', 'job page alex/679909');
    const id = (await page.textContent('[data-testid="job-id"]')).trim();
    if (id !== '679909') Fail(`job page: shows job "${id}", expected 679909`);
    const facts = (await page.textContent('[data-testid="job-facts"]')).replace(/\s+/g, ' ');
    if (!/A40|a40|GPU/.test(facts)) Fail(`job page alex/679909: its facts do not mention its GPUs: ${facts.slice(0, 300)}`);
    Log(`job page alex/679909: ${facts.slice(0, 160)}…`);
    await Shot(page, 'job-alex.png');

    await page.goto(`${base_url}/#/job/${encodeURIComponent(live_cluster)}/${encodeURIComponent(live_job)}`);
    await WaitFor(page, '[data-testid="job-facts"]', `job page ${live_cluster}/${live_job}`);
    for (const metric of ['cpu_cores', 'memory_bytes']) {
      await page.waitForFunction((m) => Number(document.querySelector(`[data-testid="chart-${m}"]`)?.dataset.points || 0) > 0,
        metric, { timeout: 20000 }).catch(() => Fail(`live job page: the ${metric} chart has no points after 20 s`));
    }
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="flamegraph"] g.frame').length > 0,
      null, { timeout: 30000 }).catch(() => Fail('live job page: the flame graph has no frames after 30 s'));
    const frames = await page.$$eval('[data-testid="flamegraph"] g.frame', (gs) => gs.length);
    Log(`live job page: charts have points, flame graph of ${frames} frames`);
    await Shot(page, 'job-live.png');

    // ---- report
    await page.goto(`${base_url}/#/report`);
    await WaitFor(page, '[data-testid="report-jobs"]', 'report');
    const jobs = Number((await page.textContent('[data-testid="report-jobs"]')).replace(/[^\d]/g, ''));
    if (!(jobs > 0)) Fail('report: the default window has no jobs');
    Log(`report (default window): ${jobs} jobs; ${(await page.textContent('[data-testid="report-window"]')).replace(/\s+/g, ' ').trim()}`);
    await Shot(page, 'report.png');

    await page.goto(`${base_url}/#/report?cluster=alex`);
    await WaitFor(page, '[data-testid="report-window-note"]', 'report of alex');
    const note = (await page.textContent('[data-testid="report-window-note"]')).trim();
    if (note !== 'No jobs ended in the last 14 days; showing the 14 days up to 2023-02-10.') Fail(`report of alex: window note "${note}"`);
    const alex_jobs = Number((await page.textContent('[data-testid="report-jobs"]')).replace(/[^\d]/g, ''));
    if (alex_jobs !== 303) Fail(`report of alex: ${alex_jobs} jobs, expected the 303 of its accounting`);
    Log(`report of alex: ${note} ${alex_jobs} jobs`);
    await Shot(page, 'report-alex.png');

    // The HPC2N trace knows its machine (MaxProcs): the admin's report replays its jobs.
    await page.goto(`${base_url}/#/report?cluster=HPC2N`);
    await WaitFor(page, 'table[data-testid="report-queue"]', 'report of HPC2N: what the queue would have done');
    const queue = (await page.textContent('table[data-testid="report-queue"]')).replace(/\s+/g, ' ').trim();
    if (!queue.includes("users'") || !queue.includes('right-sized')) Fail(`report of HPC2N: queue table "${queue}"`);
    Log(`report of HPC2N, the queue: ${queue}`);

    if (page_errors.length) Fail(`uncaught errors in the page: ${page_errors.join(' | ')}`);
  } finally {
    await browser.close();
  }
}

Main().then(() => {
  Log('all checks passed');
}).catch((e) => {
  console.error(`demo_test: FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  process.exit(1);
});
