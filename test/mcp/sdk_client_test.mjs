// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk from npm, pinned by
// test/mcp/package-lock.json) driving the real `rightsize mcp` over stdio: it lists the tools,
// calls every one (the SDK checks each answer's structuredContent against the tool's
// outputSchema and throws when it does not fit), reads the resources, and sends malformed calls,
// which must come back as JSON-RPC errors or isError results while the server stays up.
//
// Usage: node sdk_client_test.mjs NODE_MODULES RIGHTSIZE TESTDIR SRCDIR
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [nodeModules, RS, TESTDIR, SRCDIR] = process.argv.slice(2);
const require = createRequire(join(nodeModules, 'x.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { McpError, ErrorCode, CallToolResultSchema, EmptyResultSchema, LATEST_PROTOCOL_VERSION } =
    require('@modelcontextprotocol/sdk/types.js');

let passed = 0, failed = 0;
function check(what, ok, detail = '') {
  if (ok) {
    passed++;
    console.log(`ok: ${what}`);
  } else {
    failed++;
    console.log(`FAIL: ${what} ${JSON.stringify(detail)?.slice(0, 800)}`);
  }
}
async function expectError(what, promise, code) {
  try {
    const r = await promise;
    check(`${what}: error ${code}`, false, r);
  } catch (e) {
    check(`${what}: error ${code}`, e instanceof McpError && e.code === code, String(e));
  }
}

const work = mkdtempSync(join(tmpdir(), 'rightsize-mcp-sdk.'));
const db = join(work, 'store.db');
const DATA = join(TESTDIR, 'data');
for (const [f, cluster] of [['mixed.psv', 'c1'], ['oom-cgroup-v1.psv', 'v1']]) {
  execFileSync(RS, ['--db', db, 'ingest', 'sacct', join(DATA, 'sacct/slurm22', f), '--cluster',
                    cluster], {stdio: 'ignore'});
}

const transport = new StdioClientTransport({command: RS, args: ['--db', db, 'mcp'], stderr: 'pipe'});
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
// The client hands the negotiated version to a transport that takes it (stdio's does not).
let negotiated;
transport.setProtocolVersion = (v) => { negotiated = v; };
const client = new Client({name: 'rightsize-sdk-test', version: '1.0.0'});
try {
  await client.connect(transport);
  check(`the server agreed on the SDK's newest protocol, ${LATEST_PROTOCOL_VERSION}`,
        negotiated === LATEST_PROTOCOL_VERSION, negotiated);
  check('the server names itself', client.getServerVersion()?.name === 'rightsize',
        client.getServerVersion());
  check('the server says it has tools and resources',
        !!client.getServerCapabilities()?.tools && !!client.getServerCapabilities()?.resources);

  const {tools} = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check('lists the six tools', JSON.stringify(names) ===
        JSON.stringify(['advise', 'diagnose', 'eval', 'job', 'predict', 'report']), names);
  check('every tool has an outputSchema', tools.every((t) => t.outputSchema?.type === 'object'));

  const code = join(DATA, 'code/gpt2_finetune');
  const log = join(DATA, 'failures/dev/gpu_oom/pt2_fragmentation.log');
  const trace = join(SRCDIR, 'data/traces/HPC2N-excerpt-alea.swf.gz');
  const calls = [
    ['predict', {script: join(code, 'train.sh'), cluster: 'c1', user: 'root'},
     'rightsize.predict/v1'],
    ['predict', {script_text: readFileSync(join(DATA, 'scripts/gpu_a100.sh'), 'utf8'),
                 cluster: 'c1'},
     'rightsize.predict/v1'],
    ['advise', {script: join(code, 'train.sh')}, 'rightsize.advise/v1'],
    ['advise', {code: join(code, 'train.py'), gpu: 'A100-80GB'}, 'rightsize.advise/v1'],
    ['diagnose', {job_id: '11', cluster: 'v1', save: false}, 'rightsize.diagnosis/v1'],
    ['diagnose', {log_text: readFileSync(log, 'utf8')}, 'rightsize.diagnosis/v1'],
    ['job', {job_id: '2', cluster: 'c1'}, 'rightsize.job/v1'],
    ['report', {cluster: 'c1', by: 'user'}, 'rightsize.report/v1'],
    ['eval', {trace, retrain_every_s: 30 * 86400}, 'rightsize.eval/v1'],
  ];
  const called = new Set();
  for (const [name, args, schema] of calls) {
    try {
      // callTool validates structuredContent against the tool's outputSchema (ajv) and throws
      // an McpError when it does not fit.
      const r = await client.callTool({name, arguments: args}, CallToolResultSchema,
                                      {timeout: 300000});
      const ok = !r.isError && r.structuredContent?.schema === schema;
      check(`${name} ${JSON.stringify(args).slice(0, 80)}: ${schema}, valid against its ` +
            'outputSchema', ok, r);
      if (!ok) continue;
      check(`${name}: the text block is the same JSON`,
            JSON.stringify(JSON.parse(r.content[0].text)) === JSON.stringify(r.structuredContent));
      called.add(name);
    } catch (e) {
      check(`${name}: answered`, false, String(e));
    }
  }
  check('the SDK holds a validator for every outputSchema',
        tools.every((t) => client.getToolOutputValidator(t.name)));
  // And it does check: the same call against an outputSchema the answer does not fit throws.
  const job = tools.find((t) => t.name === 'job');
  client.cacheToolMetadata(
      [{...job, outputSchema: {type: 'object', required: ['no_such_member']}}]);
  await expectError('an answer checked against an outputSchema it does not fit',
                    client.callTool({name: 'job', arguments: {job_id: '2', cluster: 'c1'}}),
                    ErrorCode.InvalidParams);
  client.cacheToolMetadata(tools);
  check('every listed tool was called with a valid answer', names.every((n) => called.has(n)),
        [...called]);

  // Resources.
  const {resourceTemplates} = await client.listResourceTemplates();
  check('two resource templates', resourceTemplates.length === 2, resourceTemplates);
  const {resources} = await client.listResources();
  check('a resource per stored job', resources.length === 12, resources.length);
  for (const uri of [resources[0].uri, 'rightsize://job/11?cluster=v1',
                     'rightsize://job/11/series?cluster=v1']) {
    const r = await client.readResource({uri});
    const doc = JSON.parse(r.contents[0].text);
    check(`read ${uri}`, r.contents[0].uri === uri && (doc.schema === 'rightsize.job/v1' ||
                                                        'series' in doc), doc);
  }

  // Malformed calls: JSON-RPC errors.
  await expectError('an unknown tool', client.callTool({name: 'rm', arguments: {}}),
                    ErrorCode.InvalidParams);
  await expectError('an unknown method', client.request({method: 'tools/frobnicate'},
                                                        EmptyResultSchema),
                    ErrorCode.MethodNotFound);
  await expectError('tools/call without a name',
                    client.request({method: 'tools/call', params: {arguments: {}}},
                                   CallToolResultSchema),
                    ErrorCode.InvalidParams);
  await expectError('a resource that is not there',
                    client.readResource({uri: 'rightsize://job/424242'}), -32002);
  await expectError('a uri of no template', client.readResource({uri: 'file:///etc/passwd'}),
                    ErrorCode.InvalidParams);
  // Arguments the inputSchema refuses and failing tools: isError results.
  for (const [name, args] of [['job', {}], ['job', {job_id: 7}], ['report', {since: 'soon'}],
                              ['diagnose', {}], ['advise', {code: work}],
                              ['predict', {script: join(work, 'missing.sh')}]]) {
    const r = await client.callTool({name, arguments: args});
    check(`${name} ${JSON.stringify(args)}: isError with a reason`,
          r.isError === true && r.content[0].text.length > 0, r);
  }
  await client.ping();
  check('the server still answers after all that', true);
} catch (e) {
  check('the session ran to its end', false, `${e?.stack ?? e}\nserver stderr: ${stderr}`);
} finally {
  await client.close();
  rmSync(work, {recursive: true, force: true});
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
