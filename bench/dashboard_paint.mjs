// dashboard_paint: how soon the dashboard shows something, and its data, in a real browser
// (Debian's Chromium, headless, driven by playwright-core from web/node_modules). It starts
// nothing itself: point it at a running `rightsize serve`.
//
// Each of --runs loads opens a fresh browser context (empty cache, new connection) and loads one
// page: `/` (the overview), `/#/jobs` (the job list) and, with JOB=cluster/id, that job's page.
// Per page it reports, median and worst over the runs: the first contentful paint (Chromium's
// own `first-contentful-paint` entry: the page's frame and "Loading…") and the time until the
// page's data is on screen (the overview's running-jobs figure, the job list's count, the job
// page's facts), both from the start of navigation.
//
// Usage: BASE_URL=http://127.0.0.1:8080 [RUNS=20] [JOB=cluster/id] [TOKEN=T] \
//          node bench/dashboard_paint.mjs
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
function LoadPlaywright() {
  const roots = [path.resolve(here, '../web'),
    process.env.RIGHTSIZE_WEB_BUILD || path.resolve(here, '../build/web')];
  for (const root of roots) {
    try {
      return createRequire(path.join(root, 'package.json'))('playwright-core');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  console.error(`dashboard_paint: playwright-core not found under ${roots.join(' or ')}/node_modules; run npm ci --prefix web`);
  process.exit(1);
}
const { chromium } = LoadPlaywright();

const env = process.env;
const base = (env.BASE_URL || '').replace(/\/+$/, '');
if (!base) {
  console.error('dashboard_paint: set BASE_URL (e.g. http://127.0.0.1:8080)');
  process.exit(1);
}
const runs = Number(env.RUNS || 20);
const pages = [
  { name: 'overview', url: '/', ready: '[data-testid="running-jobs"], [data-testid="running-total"]' },
  { name: 'job list', url: '/#/jobs', ready: '[data-testid="jobs-count"][data-count]' },
];
if (env.JOB) {
  const [cluster, id] = env.JOB.split('/');
  pages.push({ name: `job ${env.JOB}`, url: `/#/job/${encodeURIComponent(cluster)}/${encodeURIComponent(id)}`,
    ready: '[data-testid="job-facts"]' });
}

function Quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))];
}

const browser = await chromium.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--no-sandbox'],
});
try {
  for (const p of pages) {
    const fcp = [];
    const ready = [];
    for (let i = 0; i < runs + 1; ++i) {
      const context = await browser.newContext({
        viewport: { width: 1400, height: 1000 },
        extraHTTPHeaders: env.TOKEN ? { Authorization: `Bearer ${env.TOKEN}` } : {},
      });
      const page = await context.newPage();
      // Noted in the page itself, the moment the data's element is added: no polling delay.
      await page.addInitScript((sel) => {
        new MutationObserver((_, obs) => {
          if (window.__ready_ms === undefined && document.querySelector(sel)) {
            window.__ready_ms = performance.now();
            obs.disconnect();
          }
        }).observe(document, { childList: true, subtree: true, attributes: true });
      }, p.ready);
      await page.goto(`${base}${p.url}`, { waitUntil: 'commit' });
      await page.waitForSelector(p.ready, { timeout: 30000 });
      const t = await page.evaluate(() => new Promise((resolve) => {
        const done = (e) => resolve({ fcp: e ? e.startTime : null, ready: window.__ready_ms });
        const entry = performance.getEntriesByName('first-contentful-paint')[0];
        if (entry) return done(entry);
        new PerformanceObserver((list) => {
          const e = list.getEntriesByName('first-contentful-paint')[0];
          if (e) done(e);
        }).observe({ type: 'paint', buffered: true });
        setTimeout(() => done(null), 5000);
      }));
      await context.close();
      if (i === 0) continue;  // the first load warms the browser itself, not the page
      if (t.fcp !== null) fcp.push(t.fcp);
      ready.push(t.ready);
    }
    const fmt = (xs) => xs.length === 0 ? 'not reported'
      : `median ${Quantile(xs, 0.5).toFixed(0)} ms, worst ${Math.max(...xs).toFixed(0)} ms`;
    console.log(`${p.name} (${p.url}), ${runs} fresh loads: first contentful paint ${fmt(fcp)}; data on screen ${fmt(ready)}`);
  }
} finally {
  await browser.close();
}
