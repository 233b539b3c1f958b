// Browser test of jobs the agent saw before accounting did (issue 28), against the store that
// agent_jobs_test.sh fills through a real agent and a real `ingest sacct`:
//   - demo/5101 died of MemoryError: its page shows FAILED with exit 1, the diagnosis read from
//     its output file (host_oom), and advice that asks for more memory first, never less;
//   - array job 5200: its tasks (raw ids 5201, 5202 to the agent, 5200_0 / 5200_1 to sacct) are
//     two jobs in the list and in the report, not four.
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=/tmp/shots node test/web/agent_jobs_test.mjs
//
// Screenshots: agent-failed-job.png, agent-array-jobs.png, agent-report.png. Exit 0 on success,
// 1 naming the failed check.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { LoadPlaywright } from './playwright.mjs';

const { chromium } = LoadPlaywright('agent_jobs_test');

const env = process.env;
const base_url = (env.BASE_URL || '').replace(/\/+$/, '');
const screenshot_dir = env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'rightsize-agent-jobs-shots');
if (!base_url) {
  console.error('agent_jobs_test: BASE_URL must be set (SCREENSHOT_DIR optional)');
  process.exit(1);
}
mkdirSync(screenshot_dir, { recursive: true });

class CheckFailed extends Error {}
function Fail(msg) { throw new CheckFailed(msg); }
function Log(msg) { console.log(`agent_jobs_test: ${msg}`); }

async function WaitFor(page, selector, what, timeout = 20000) {
  const found = await page.waitForSelector(`${selector}, [data-testid="error"]`, { timeout, state: 'attached' })
    .catch(() => null);
  if (!found) Fail(`${what}: nothing appeared within ${timeout / 1000} s (waited for ${selector})`);
  const error = await page.$('[data-testid="error"]');
  if (error && !(await page.$(selector))) Fail(`${what}: the page shows an error: ${(await error.innerText()).trim()}`);
  return page.$(selector);
}

async function Text(page, selector) {
  return ((await page.textContent(selector)) || '').replace(/\s+/g, ' ').trim();
}

async function Shot(page, name) {
  const file = path.join(screenshot_dir, name);
  await page.screenshot({ path: file, fullPage: true });
  Log(`screenshot ${file}`);
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

    // ---- the failed job, known only from the agent
    await page.goto(`${base_url}/#/job/demo/5101`);
    await WaitFor(page, '[data-testid="job-state"]', 'job page demo/5101');
    const state = await Text(page, '[data-testid="job-state"]');
    if (!state.includes('FAILED') || !state.includes('exit 1')) Fail(`job 5101: state "${state}", expected FAILED with exit 1`);
    await WaitFor(page, '[data-testid="diagnosis-class"]', 'job 5101 diagnosis');
    const cls = await Text(page, '[data-testid="diagnosis-class"]');
    if (cls !== 'host_oom') Fail(`job 5101: diagnosis "${cls}", expected host_oom (its MemoryError in slurm-5101.out)`);
    await WaitFor(page, '[data-testid="job-advice"]', 'job 5101 advice');
    const advice = await page.$$eval('[data-testid="advice-item"]', (els) => els.map((e) => e.textContent.replace(/\s+/g, ' ').trim()));
    if (!advice.length || !/^Memory:.*ask for more/.test(advice[0])) Fail(`job 5101: the first advice does not ask for more memory: ${JSON.stringify(advice)}`);
    const mem = /--mem=(\d+)G/.exec(advice[0]);
    if (!mem || Number(mem[1]) <= 16) Fail(`job 5101: asked for 16G and ran out of memory, advised "${advice[0]}"`);
    Log(`job 5101: "${state}", diagnosis ${cls}; first advice: ${advice[0]}`);
    await Shot(page, 'agent-failed-job.png');

    // ---- the array job: one row per task, under SLURM's names
    await page.goto(`${base_url}/#/jobs?cluster=demo`);
    await WaitFor(page, '[data-testid="jobs-count"][data-count]', 'job list of demo');
    const rows = await page.$$eval('tr[data-testid="job-row"]', (trs) => trs.map((tr) => ({
      id: tr.dataset.jobId, state: tr.cells[4].textContent.trim() })));
    const ids = rows.map((r) => r.id);
    const tasks = ids.filter((id) => id.startsWith('5200_')).sort();
    if (JSON.stringify(tasks) !== '["5200_0","5200_1"]') Fail(`job list: array 5200's tasks are ${JSON.stringify(tasks)}`);
    const raw = ids.filter((id) => id === '5201' || id === '5202');
    if (raw.length) Fail(`job list: the tasks are also listed under their raw ids ${raw.join(', ')} (counted twice)`);
    Log(`job list of demo: ${ids.join(', ')}`);
    await Shot(page, 'agent-array-jobs.png');

    await page.goto(`${base_url}/#/report?cluster=demo`);
    await WaitFor(page, '[data-testid="report-jobs"]', 'report of demo');
    const jobs = Number((await page.textContent('[data-testid="report-jobs"]')).replace(/[^\d]/g, ''));
    // The agent watches every SLURM job on this machine: other tests' jobs may be in the list too.
    // The report counts each ended job once: as many as the list has ended rows.
    const ended = rows.filter((r) => !r.state.startsWith('RUNNING')).length;
    if (jobs !== ended || ended < 3) Fail(`report of demo: ${jobs} jobs, the list has ${ended} ended (job 5101, array 5200's two tasks${ended > 3 ? ' and others' : ''})`);
    Log(`report of demo: ${jobs} jobs`);
    await Shot(page, 'agent-report.png');

    if (page_errors.length) Fail(`uncaught errors in the page: ${page_errors.join(' | ')}`);
  } finally {
    await browser.close();
  }
}

Main().then(() => {
  Log('all checks passed');
}).catch((e) => {
  console.error(`agent_jobs_test: FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  process.exit(1);
});
