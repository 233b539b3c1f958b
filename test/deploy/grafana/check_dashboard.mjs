// Checks a Grafana dashboard against Prometheus expositions scraped from running binaries:
// every PromQL expression in the dashboard (panel targets and query variables) is parsed with
// Prometheus's own grammar (@prometheus-io/lezer-promql), and every metric it selects must have
// at least one sample in one of the expositions. Also checks what makes the JSON importable:
// a current schemaVersion, a Prometheus datasource variable that every panel uses.
// Usage: node check_dashboard.mjs DASHBOARD.json EXPOSITION... ; exit 0 when all hold.
// With EXPRS_OUT=FILE, also writes each expression as Grafana would send it with every variable
// set to All (.*), one a line, for evaluation by a real Prometheus.
// Prints one line per check ("ok: ..." / "FAIL: ...") and the metric names it found.
import { readFileSync, writeFileSync } from 'node:fs';
import { parser } from '@prometheus-io/lezer-promql';

const [dashboardPath, ...expositions] = process.argv.slice(2);
let failed = 0;
let passed = 0;
const ok = (what) => { passed++; console.log(`ok: ${what}`); };
const fail = (what) => { failed++; console.log(`FAIL: ${what}`); };

// Metric names with at least one sample line (a # TYPE line alone is a metric with no data).
const exported = new Set();
for (const path of expositions) {
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{| )/.exec(line);
    if (m) exported.add(m[1]);
  }
}

// Grafana's interval macros and template variables become what Grafana would send.
function substitute(expr) {
  return expr
    .replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, '5m')
    .replace(/\$__(interval_ms|range_s|range_ms)\b/g, '300');
}

// The metric names an expression selects; throws on a syntax error.
function metricNames(expr) {
  const text = substitute(expr);
  const tree = parser.parse(text);
  const names = [];
  const errors = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name !== 'VectorSelector') return;
      const id = node.node.getChild('Identifier');
      if (id) {
        names.push(text.slice(id.from, id.to));
        return;
      }
      // {__name__="x"}: the name as a label; a regex name cannot be checked.
      const m = /__name__\s*(=~|!=|!~|=)\s*"([^"]*)"/.exec(text.slice(node.from, node.to));
      if (m && m[1] === '=') names.push(m[2]);
      else errors.push(node.from);
    },
  });
  if (errors.length) {
    throw new Error(`PromQL syntax error at ${errors[0]} in: ${text}`);
  }
  return names;
}

const dashboard = JSON.parse(readFileSync(dashboardPath, 'utf8'));
if (dashboard.schemaVersion >= 36) ok(`schemaVersion ${dashboard.schemaVersion}`);
else fail(`schemaVersion ${dashboard.schemaVersion}: Grafana 9+ dashboards have 36 or more`);
if (dashboard.id === null && dashboard.uid) ok('importable: no database id, a fixed uid');
else fail('importable: id must be null and uid set');

const variables = dashboard.templating?.list ?? [];
const dsVar = variables.find((v) => v.type === 'datasource' && v.query === 'prometheus');
if (dsVar) ok(`Prometheus datasource variable $${dsVar.name}`);
else fail('no datasource variable of type prometheus');
const dsRef = dsVar ? `\${${dsVar.name}}` : null;

// Every expression: [where, expr].
const exprs = [];
for (const v of variables) {
  if (v.type !== 'query') continue;
  const q = typeof v.query === 'string' ? v.query : v.query?.query ?? '';
  if (v.datasource?.uid !== dsRef) fail(`variable ${v.name} does not use ${dsRef}`);
  // label_values(SELECTOR, label) / query_result(EXPR): the selector or expression inside.
  const m = /^\s*(?:label_values|query_result)\((.*?)(?:,\s*[a-zA-Z_][a-zA-Z0-9_]*)?\)\s*$/.exec(q);
  if (m) exprs.push([`variable ${v.name}`, m[1]]);
  else fail(`variable ${v.name}: unrecognised query ${q}`);
}
const panels = [];
const walk = (list) => {
  for (const p of list ?? []) {
    panels.push(p);
    walk(p.panels);
  }
};
walk(dashboard.panels);
let panelsWithQueries = 0;
for (const p of panels) {
  if (p.type === 'row') continue;
  if (p.datasource?.uid !== dsRef) fail(`panel "${p.title}" does not use ${dsRef}`);
  if (!p.targets?.length) {
    fail(`panel "${p.title}" has no query`);
    continue;
  }
  panelsWithQueries++;
  for (const t of p.targets) {
    if (t.datasource && t.datasource.uid !== dsRef) fail(`panel "${p.title}" target uses another datasource`);
    exprs.push([`panel "${p.title}" ${t.refId}`, t.expr ?? '']);
  }
}
console.log(`${panelsWithQueries} panels, ${exprs.length} expressions`);

const used = new Set();
for (const [where, expr] of exprs) {
  let names;
  try {
    names = metricNames(expr);
  } catch (e) {
    fail(`${where}: ${e.message}`);
    continue;
  }
  if (!names.length) fail(`${where}: selects no metric: ${expr}`);
  for (const n of names) {
    used.add(n);
    if (!exported.has(n)) fail(`${where} queries ${n}, which the binaries did not export`);
  }
}
if (process.env.EXPRS_OUT) {
  const all = exprs.map(([, e]) => substitute(e).replace(/\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?/g, '.*'));
  writeFileSync(process.env.EXPRS_OUT, all.join('\n') + '\n');
}
console.log(`metrics queried: ${[...used].sort().join(' ')}`);
if (!failed) ok(`every one of ${used.size} metrics has samples in the scraped /metrics`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
