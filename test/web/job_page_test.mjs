// Browser test of the dashboard's job page (web/src/app.js, #/job/CLUSTER/ID), run by
// job_page_test.sh against a real `rightsize serve`:
//
//   BASE_URL=http://127.0.0.1:8080 LIVE_CLUSTER=webtest LIVE_JOB=4712 SACCT_CLUSTER=rstest \
//   SCREENSHOT_DIR=/tmp/shots node test/web/job_page_test.mjs
//
// It checks what a user would notice on the page: the advice and cost of the job card (job 900:
// "-c 1", "--mem=768M", the dollars unused; job 901, an idle A100: its dollars unused and "does
// this job need a GPU at all?"); a TIMEOUT (job 1, SLURM's exit 0:0) says it hit
// its time limit and never "exit 0", and asks for more time first; a FAILED job (job 3) shows
// its exit code; an OUT_OF_MEMORY job (job 11) asks for more memory first and for no less; on
// the live job LIVE_JOB, every chart's legend shows values without a hover and no y axis
// repeats a tick label (the processes axis ticks whole numbers only); once PHASES_JOB (20 s
// small, then 20 s holding 300 MiB more) has ended, its page shows its phases, one starting where
// the memory grew and the last holding it, and what a split would free. Screenshots job-*.png go
// to SCREENSHOT_DIR. Exit 0 on success, 1 with a message naming each failed check.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { LoadPlaywright } from './playwright.mjs';

const { chromium } = LoadPlaywright('job_page_test');

const env = process.env;
const base_url = (env.BASE_URL || '').replace(/\/+$/, '');
const live_cluster = env.LIVE_CLUSTER || '';
const live_job = env.LIVE_JOB || '';
const phases_job = env.PHASES_JOB || '';
const sacct_cluster = env.SACCT_CLUSTER || '';
const screenshot_dir = env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'rightsize-dashboard-shots');

class CheckFailed extends Error {}
function Fail(msg) { throw new CheckFailed(msg); }
function Log(msg) { console.log(`job_page_test: ${msg}`); }

for (const [name, value] of [['BASE_URL', base_url], ['LIVE_CLUSTER', live_cluster], ['LIVE_JOB', live_job], ['SACCT_CLUSTER', sacct_cluster]]) {
  if (!value) {
    console.error(`job_page_test: ${name} is not set (need BASE_URL, LIVE_CLUSTER, LIVE_JOB, SACCT_CLUSTER; SCREENSHOT_DIR optional)`);
    process.exit(1);
  }
}
mkdirSync(screenshot_dir, { recursive: true });

async function Shot(page, name) {
  const file = path.join(screenshot_dir, name);
  await page.screenshot({ path: file, fullPage: true });
  Log(`screenshot ${file}`);
}

// Opens a job's page and waits for its header; fails with the page's error if it shows one.
async function OpenJob(page, cluster, id) {
  await page.goto(`${base_url}/#/job/${encodeURIComponent(cluster)}/${encodeURIComponent(id)}`);
  const found = await page.waitForSelector('[data-testid="job-facts"], [data-testid="error"]', { timeout: 15000 })
    .catch(() => null);
  if (!found) Fail(`job ${cluster}/${id}: the page showed nothing within 15 s`);
  const error = await page.$('[data-testid="error"]');
  if (error && !(await page.$('[data-testid="job-facts"]'))) Fail(`job ${cluster}/${id}: the page shows an error: ${(await error.innerText()).trim()}`);
}

const Known = (v) => v !== null && v !== undefined;
const Text = async (page, sel) => ((await page.$(sel)) ? (await page.textContent(sel)).replace(/\s+/g, ' ').trim() : '');
const Advice = (page) => page.$$eval('[data-testid="advice-item"]', (li) => li.map((x) => x.textContent.trim()));
const Flags = (page) => page.$$eval('[data-testid="job-flag"]', (c) => c.map((x) => x.textContent.trim()));

async function CheckAdvice(page) {
  await OpenJob(page, sacct_cluster, '900');
  await page.waitForSelector('[data-testid="job-advice"]', { timeout: 10000 })
    .catch(() => Fail('job 900: no advice on the job page (the card the CLI prints)'));
  const flags = await Flags(page);
  for (const want of ['-c 1', '--mem=768M']) {
    if (!flags.includes(want)) Fail(`job 900: the advice does not ask for ${want} (it asks for: ${flags.join(', ') || 'nothing'})`);
  }
  const unused = await Text(page, '[data-testid="job-unused"]');
  if (!/^\$[0-9.,]+ unused$/.test(unused)) Fail(`job 900: the cost does not say how much was unused ("${unused}")`);
  const advice = await Advice(page);
  if (!advice.some((a) => a.includes('ask for -c 1'))) Fail(`job 900: no advice sentence on its CPUs: ${advice.join(' | ')}`);
  Log(`job 900: asks for ${flags.join(' ')}; ${await Text(page, '[data-testid="job-cost"]')}`);
  await Shot(page, 'job-advice.png');

  // An idle GPU: its cost unused, and the question the CLI card asks.
  await OpenJob(page, sacct_cluster, '901');
  await page.waitForSelector('[data-testid="job-advice"]', { timeout: 10000 })
    .catch(() => Fail('job 901: no advice on the job page'));
  const gpu_unused = await Text(page, '[data-testid="job-unused"]');
  const dollars = Number(gpu_unused.replace(/[^0-9.]/g, ''));
  if (!(dollars >= 30)) Fail(`job 901: 12 idle A100 hours, but the page says "${gpu_unused}"`);
  const gpu_advice = await Advice(page);
  if (!gpu_advice.some((a) => a.includes('does this job need a GPU at all?'))) Fail(`job 901: no word on its idle GPU: ${gpu_advice.join(' | ')}`);
  Log(`job 901: ${gpu_unused}; ${gpu_advice.find((a) => a.startsWith('GPU'))}`);
  await Shot(page, 'job-idle-gpu.png');
}

async function CheckTimeout(page) {
  await OpenJob(page, sacct_cluster, '1');
  const state = await Text(page, '[data-testid="job-state"]');
  if (!state.includes('TIMEOUT')) Fail(`job 1: state "${state}", expected TIMEOUT`);
  if (/exit 0/.test(state)) Fail(`job 1: a job stopped at its time limit reads "${state}"`);
  if (!state.includes('time limit')) Fail(`job 1: the state does not say it hit its time limit: "${state}"`);
  const advice = await Advice(page);
  if (!(advice[0] || '').startsWith('Time:') || !advice[0].includes('ask for more')) {
    Fail(`job 1: the first advice is not to ask for more time: ${advice.join(' | ') || '(none)'}`);
  }
  if (!(await Flags(page)).includes('--time=00:02:00')) Fail(`job 1: no --time=00:02:00 (1.5x its 1 minute, in whole minutes) among ${(await Flags(page)).join(', ')}`);
  Log(`job 1: "${state}"; first advice: ${advice[0]}`);
  await Shot(page, 'job-timeout.png');
}

async function CheckFailedJob(page) {
  await OpenJob(page, sacct_cluster, '3');
  const state = await Text(page, '[data-testid="job-state"]');
  if (!state.includes('FAILED') || !state.includes('exit 3')) Fail(`job 3: state "${state}", expected FAILED with exit 3`);
  Log(`job 3: "${state}"`);
  await Shot(page, 'job-failed.png');
}

async function CheckOom(page) {
  await OpenJob(page, sacct_cluster, '11');
  const state = await Text(page, '[data-testid="job-state"]');
  if (!state.includes('OUT_OF_MEMORY') || !state.includes('ran out of memory')) Fail(`job 11: state "${state}"`);
  const advice = await Advice(page);
  if (!(advice[0] || '').startsWith('Memory: this job ran out of memory') || !advice[0].includes('ask for more')) {
    Fail(`job 11: the first advice is not to ask for more memory: ${advice.join(' | ') || '(none)'}`);
  }
  // 1.5x its 100M, in 256M steps.
  const flags = await Flags(page);
  if (!flags.includes('--mem=256M')) Fail(`job 11: expected --mem=256M, it asks for ${flags.join(', ') || 'nothing'}`);
  if (advice.some((a) => /ask for (-c|--mem|--time)/.test(a))) Fail(`job 11: an OOM-killed job is told to ask for less: ${advice.join(' | ')}`);
  Log(`job 11: "${state}"; first advice: ${advice[0]}`);
  await Shot(page, 'job-oom.png');
}

// The live job's charts: legends read values with the cursor off the charts; no y axis repeats.
async function CheckCharts(page) {
  await OpenJob(page, live_cluster, live_job);
  for (const metric of ['cpu_cores', 'memory_bytes', 'processes']) {
    await page.waitForFunction((m) => Number(document.querySelector(`[data-testid="chart-${m}"]`)?.dataset.points || 0) >= 3,
      metric, { timeout: 20000 }).catch(() => Fail(`job ${live_job}: the ${metric} chart has fewer than 3 points after 20 s`));
  }
  await page.mouse.move(0, 0);
  await page.waitForTimeout(2500);  // a live update or two, the cursor still off the charts
  const charts = await page.$$eval('section.chart:not([hidden])', (els) => els.map((el) => ({
    id: el.dataset.testid,
    ticks: (el.dataset.yTicks || '').split('|').filter((t) => t !== ''),
    legend: [...el.querySelectorAll('.u-legend tr.u-series')]
      .map((tr) => [tr.querySelector('.u-label')?.textContent.trim(), tr.querySelector('.u-value')?.textContent.trim()]),
  })));
  if (charts.length < 3) Fail(`job ${live_job}: only ${charts.length} charts are shown`);
  for (const c of charts) {
    if (c.legend.length === 0) Fail(`${c.id}: no legend`);
    const blank = c.legend.filter(([, v]) => !v || v === '—' || v === '--');
    if (blank.length) Fail(`${c.id}: without a hover the legend reads ${blank.map(([l, v]) => `${l}: "${v}"`).join(', ')}`);
    // The labels the page drew (it records them in data-y-ticks: the axis is a canvas).
    if (c.ticks.length < 2) Fail(`${c.id}: the y axis has ${c.ticks.length} labels recorded`);
    const repeated = c.ticks.filter((t, i) => c.ticks.indexOf(t) !== i);
    if (repeated.length) Fail(`${c.id}: the y axis repeats ${[...new Set(repeated)].join(', ')} (${c.ticks.join(', ')})`);
    Log(`${c.id}: y axis ${c.ticks.join(', ')}; legend ${c.legend.map(([l, v]) => `${l} ${v}`).join(', ')}`);
  }
  const processes = charts.find((c) => c.id === 'chart-processes');
  if (!processes) Fail('the processes chart is not shown');
  const fractional = processes.ticks.filter((t) => !/^[0-9,]+$/.test(t));
  if (fractional.length) Fail(`chart-processes: a count axis shows ${fractional.join(', ')}`);
  await Shot(page, 'job-live.png');
}

// A watched job whose memory grew half-way: after it ended, two phases on its page.
async function CheckPhases(page) {
  if (!phases_job) return;
  const url = `${base_url}/api/v1/jobs/${encodeURIComponent(live_cluster)}/${encodeURIComponent(phases_job)}`;
  // Ended: the agent shipped its end (the job's summary has an end time).
  let state = '';
  for (let i = 0; i < 90; ++i) {
    const r = await fetch(url);
    const d = r.ok ? await r.json() : null;
    state = d ? (d.summary || {}).state || '' : '';
    if (d && Known((d.summary || {}).end_time)) break;
    state = '';
    await new Promise((res) => setTimeout(res, 1000));
  }
  if (!state) Fail(`job ${phases_job}: not ended after 90 s`);
  await OpenJob(page, live_cluster, phases_job);
  await page.waitForSelector('[data-testid="phases-table"]', { timeout: 15000 })
    .catch(() => Fail(`job ${phases_job} (${state}): no phases table on its page`));
  const rows = await page.$$eval('[data-testid="phase-row"]', (tr) => tr.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent.trim())));
  if (rows.length < 2) Fail(`job ${phases_job}: ${rows.length} phase(s) shown, expected one before the 300 MiB and one holding them`);
  // Columns: from, lasted, CPU cores (mean), memory, a step's own request, unused.
  // Columns: from, lasted, CPU cores (mean), memory (peak), a step's own request, unused. A
  // phase starts where the 300 MiB came, 20 s in (a sample taken while they were being written
  // may fall on either side), and the last one holds them.
  const secs = (t) => { const m = /^(?:(\d+)m )?(\d+)s$/.exec(t); return m ? Number(m[1] || 0) * 60 + Number(m[2]) : NaN; };
  const mib = (t) => { const m = /([0-9.]+)\s*(KiB|MiB|GiB)/.exec(t); return m ? Number(m[1]) * { KiB: 1 / 1024, MiB: 1, GiB: 1024 }[m[2]] : NaN; };
  const from = rows.map((r) => secs(r[0]));
  const peaks = rows.map((r) => mib(r[3]));
  const shown = rows.map((r) => `${r[0]}: ${r[3]}`).join(', ');
  if (!(from[0] <= 5)) Fail(`job ${phases_job}: the first phase starts at ${rows[0][0]}`);
  if (!from.some((f) => f >= 15 && f <= 30)) Fail(`job ${phases_job}: no phase starts near 20 s (${shown})`);
  if (!(peaks[rows.length - 1] >= 290)) Fail(`job ${phases_job}: the last phase does not hold the 300 MiB (${shown})`);
  const split = await Text(page, '[data-testid="phases-split"]');
  if (!/chained steps/.test(split)) Fail(`job ${phases_job}: the split reads "${split}"`);
  Log(`job ${phases_job}: ${rows.length} phases (${shown}); ${split}`);
  await Shot(page, 'job-phases.png');
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
    // Every check runs; the failures are listed together.
    const failures = [];
    for (const check of [CheckAdvice, CheckTimeout, CheckFailedJob, CheckOom, CheckCharts, CheckPhases]) {
      try {
        await check(page);
      } catch (e) {
        if (!(e instanceof CheckFailed)) throw e;
        failures.push(e.message);
        console.error(`job_page_test: FAIL: ${e.message}`);
      }
    }
    if (page_errors.length) failures.push(`uncaught errors in the page: ${page_errors.join(' | ')}`);
    if (failures.length) Fail(`${failures.length} check(s) failed: ${failures.join('; ')}`);
  } finally {
    await browser.close();
  }
}

Main().then(() => {
  Log('all checks passed');
}).catch((e) => {
  console.error(`job_page_test: FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  process.exit(1);
});
