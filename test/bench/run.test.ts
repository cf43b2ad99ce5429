// Goal: the whole benchmark run works end to end against a service built to the contract:
// starting it, provisioning a key, every scenario with verified bytes, the three result files,
// ratios to limits, server CPU and RSS; a wrong byte, a wrong listing or a missing service makes
// it fail (exit 1), a missing multipart route only skips, bad flags exit 2. The commands run
// the benchmark under the service's allocator settings, starting it again when they are missing.
// Method: runBench in-process with the `test` profile (tiny sizes and limit budgets) against the
// fake Lightwell of fixtures/, started by the harness or already running (--endpoint).

import t from 'tap';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runBench, runBenchAsService } from '../../bench/run.js';
import { CHILD_MALLOC_ENV } from '../../src/util/malloc-env.js';
import type { BenchReport } from '../../bench/report.js';
import { SCENARIOS } from '../../bench/scenarios.js';
import { freePort } from '../../bench/service.js';
import { nativeLoadAvailable } from '../../bench/native-load.js';

const fake = fileURLToPath(new URL('./fixtures/fake-lightwell.js', import.meta.url));

const tempDirs: string[] = [];
t.teardown(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

interface BenchRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
  readonly report: BenchReport | null;
  readonly dir: string;
}

function readReport(dir: string): BenchReport | null {
  try {
    return JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as BenchReport;
  } catch {
    return null;
  }
}

/** runBench with the test profile, output captured, `env` set for the service it starts. */
async function bench(args: string[], env: Record<string, string> = {}): Promise<BenchRun> {
  const dir = tempDir('lw-bench-test-');
  let out = '';
  let err = '';
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const code = await runBench(['--profile', 'test', '--out', dir, ...args], {
      out: (text) => {
        out += text;
      },
      err: {
        write: (text: string) => {
          err += text;
        },
      },
    });
    return { code, out, err, report: readReport(dir), dir };
  } finally {
    // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- how a variable is unset
    for (const name of Object.keys(env)) delete process.env[name];
    Object.assign(process.env, saved);
  }
}

function firstFailure(run: BenchRun): string {
  return run.report?.scenarios[0]?.failures[0] ?? '';
}

t.test('all scenarios and limits against a started fake service', async (t) => {
  const run = await bench(['--lightwell-bin', fake]);
  t.equal(
    run.code,
    0,
    run.err
      .split('\n')
      .filter((l) => /FAIL/.test(l))
      .join('\n'),
  );
  const report = run.report;
  assert.ok(report !== null, 'results.json written');
  t.equal(report.scenarios.length, SCENARIOS.length);
  for (const scenario of report.scenarios) {
    const bound = SCENARIOS.find((s) => s.name === scenario.name)?.bounds[0];
    // The scripted service speaks no WebSocket: the ingest scenarios say so and skip.
    if (scenario.name.startsWith('ingest-')) {
      t.equal(scenario.status, 'skipped', scenario.name);
      continue;
    }
    t.equal(scenario.status, 'ok', scenario.name);
    t.ok(scenario.throughput.value > 0, `${scenario.name} throughput`);
    t.ok(scenario.ratios.length > 0, `${scenario.name} has a ratio to ${String(bound)}`);
    // The lifecycle scenario runs the engine's executor in this process, with no service.
    if (scenario.name.startsWith('lifecycle-')) continue;
    t.ok((scenario.serverPeakRssBytes ?? 0) > 0, `${scenario.name} server RSS`);
  }
  t.ok(
    report.limits.some((l) => l.name === 'ideal-put-random'),
    'derived limits',
  );
  t.equal(report.limits.length, 13);
  const directRead = report.limits.find((l) => l.name === 'direct-read');
  t.ok((directRead?.value ?? 0) > 0, 'the disk read back a synced file');
  const get = report.scenarios.find((s) => s.name === 'get-64m-x1-random');
  t.ok(
    get?.ratios.some((r) => r.limit === 'direct-read'),
    'large GETs are read against the disk too',
  );
  const md = readFileSync(join(run.dir, 'results.md'), 'utf8');
  const svg = readFileSync(join(run.dir, 'chart.svg'), 'utf8');
  for (const scenario of SCENARIOS) {
    if (scenario.name.startsWith('ingest-')) {
      t.match(md, `| ${scenario.name} | skipped |`);
      continue;
    }
    t.match(md, `| ${scenario.name} | ok |`);
    t.match(svg, `>${scenario.name}</text>`);
  }
  t.match(md, /Machine: .+ cores/);
  t.match(run.err, /list-1m-keys: \d+ keys\/s/, 'progress lines on stderr');
  // The native load generator where it was built; a listing builds each request from the last.
  const client = nativeLoadAvailable() ? 'native' : 'node';
  t.equal(report.settings['client'], client);
  for (const scenario of report.scenarios) {
    // The ingest scenarios stream with lightwell/client, not a load generator; the lifecycle
    // scenario sends no requests.
    if (scenario.name.startsWith('ingest-') || scenario.name.startsWith('lifecycle-')) continue;
    // The S3 scenarios run on the AWS SDK, which uses Node's HTTP client.
    t.equal(
      scenario.client,
      scenario.name === 'list-1m-keys' || scenario.name.startsWith('s3-') ? 'node' : client,
      scenario.name,
    );
  }
  for (const name of ['http-sink-put', 'http-source-get', 'http-sink-tiny']) {
    t.match(report.limits.find((l) => l.name === name)?.detail, `${client} client`, name);
  }
  if (client === 'native') t.match(md, '- list-1m-keys: ran on the node client');
});

t.test(
  '--client node runs everything on the Node client; a bad --client is a usage error',
  async (t) => {
    const run = await bench([
      '--lightwell-bin',
      fake,
      '--only',
      'put-4k-c64,get-4k-c64',
      '--client',
      'node',
    ]);
    t.equal(run.code, 0);
    t.equal(run.report?.settings['client'], 'node');
    t.same(
      run.report?.scenarios.map((s) => s.client),
      ['node', 'node'],
    );
    t.match(run.report?.limits.find((l) => l.name === 'http-sink-tiny')?.detail, 'node client');
    const bad = await bench(['--client', 'curl']);
    t.equal(bad.code, 2);
    t.match(bad.err, /--client must be node or native/);
  },
);

t.test('a corrupted GET, a wrong listing or no multipart', async (t) => {
  const only = (name: string): string[] => [
    '--lightwell-bin',
    fake,
    '--skip-limits',
    '--only',
    name,
  ];
  const corrupt = await bench(only('get-4k-c64'), { FAKE_CORRUPT_GET: '1' });
  t.equal(corrupt.code, 1);
  t.match(firstFailure(corrupt), /CRC32/);
  const list = await bench(only('list-1m-keys'), { FAKE_BAD_LIST: '1' });
  t.equal(list.code, 1);
  t.match(firstFailure(list), /key #5 is o\/00000006, expected o\/00000005/);
  const multipart = await bench(only('multipart-1g-16p'), { FAKE_NO_MULTIPART: '1' });
  t.equal(multipart.code, 0);
  t.equal(multipart.report?.scenarios[0]?.status, 'skipped');
});

t.test(
  'a port taken between finding it and binding it: the service is started again',
  async (t) => {
    const marker = join(tempDir('lw-bench-port-'), 'taken');
    const run = await bench(['--lightwell-bin', fake, '--skip-limits', '--only', 'put-4k-c64'], {
      FAKE_PORT_TAKEN_ONCE: marker,
    });
    t.ok(existsSync(marker), 'the first start failed with EADDRINUSE');
    t.equal(run.code, 0, 'the second start served the run');
    t.equal(run.report?.scenarios[0]?.status, 'ok');
  },
);

t.test('--gateways reaches serve and the report', async (t) => {
  const argvFile = join(tempDir('lw-bench-argv-'), 'argv.json');
  const run = await bench(
    ['--lightwell-bin', fake, '--skip-limits', '--only', 'get-4k-c64', '--gateways', '2'],
    { FAKE_ARGV_FILE: argvFile },
  );
  t.equal(run.code, 0);
  const argv = JSON.parse(readFileSync(argvFile, 'utf8')) as string[];
  t.same(argv.slice(argv.indexOf('--gateways'), argv.indexOf('--gateways') + 2), [
    '--gateways',
    '2',
  ]);
  t.equal(run.report?.settings['gateways'], 2);
  const plain = await bench(['--lightwell-bin', fake, '--skip-limits', '--only', 'get-4k-c64'], {
    FAKE_ARGV_FILE: argvFile,
  });
  t.notOk(
    (JSON.parse(readFileSync(argvFile, 'utf8')) as string[]).includes('--gateways'),
    "without the flag, serve's own default",
  );
  t.equal(plain.report?.settings['gateways'], 1);
});

/** Starts the fake as an already running service; resolves when both listeners are ready. */
async function runningFake(t: { teardown(fn: () => void): void }): Promise<{
  publicUrl: string;
  adminUrl: string;
  token: string;
  pid: number;
}> {
  const dataDir = tempDir('lw-bench-fake-');
  const [publicPort, adminPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    [
      fake,
      'serve',
      '--data-dir',
      dataDir,
      '--public-listen',
      `127.0.0.1:${publicPort}`,
      '--admin-listen',
      `127.0.0.1:${adminPort}`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.teardown(() => child.kill());
  await new Promise<void>((resolve) => {
    let seen = '';
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const ready = seen.includes('admin listener ready') && seen.includes('public listener ready');
      if (ready) resolve();
    });
  });
  const args = [fake, 'admin-token', 'create', '--data-dir', dataDir, '--role', 'owner'];
  const created = execFileSync(process.execPath, args, { encoding: 'utf8' });
  assert.ok(child.pid !== undefined);
  return {
    publicUrl: `http://127.0.0.1:${publicPort}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    token: created.trim().split('\n').pop() ?? '',
    pid: child.pid,
  };
}

t.test('a running service through --endpoint and the admin API', async (t) => {
  const service = await runningFake(t);
  const run = await bench([
    '--endpoint',
    service.publicUrl,
    '--admin-url',
    service.adminUrl,
    '--admin-token',
    service.token,
    '--server-pid',
    String(service.pid),
    '--skip-limits',
    '--only',
    'put-4k-c64,get-4k-c64',
  ]);
  t.equal(run.code, 0, run.err);
  t.equal(run.report?.settings['mode'], 'endpoint');
  t.ok((run.report?.scenarios[1]?.serverPeakRssBytes ?? 0) > 0, 'sampled through --server-pid');
  const noCredentials = await bench([
    '--endpoint',
    service.publicUrl,
    '--skip-limits',
    '--only',
    'put-4k-c64',
  ]);
  t.equal(noCredentials.code, 1);
  t.match(firstFailure(noCredentials), /needs --token/);
});

t.test('usage errors, --list, and a service that is not built', async (t) => {
  t.equal((await bench(['--only', 'nope'])).code, 2);
  t.equal((await bench(['--bogus'])).code, 2);
  for (const gateways of [
    ['--gateways', '0'],
    ['--gateways', '65'],
    ['--gateways', '1.5'],
    ['--gateways', 'two'],
  ])
    t.equal((await bench(gateways)).code, 2, gateways.join(' '));
  t.equal(
    (await bench(['--gateways', '2', '--endpoint', 'http://127.0.0.1:1'])).code,
    2,
    '--gateways with --endpoint',
  );
  const list = await bench(['--list']);
  t.equal(list.code, 0);
  t.match(list.out, /put-64m-x1-random/);
  const missing = await bench([
    '--lightwell-bin',
    '/nonexistent/lightwell.js',
    '--skip-limits',
    '--only',
    'put-4k-c64',
  ]);
  t.equal(missing.code, 1);
  t.match(firstFailure(missing), /build Lightwell first/);
});

t.test('the benchmark runs under the allocator settings of the service', async (t) => {
  const dir = tempDir('lw-bench-env-');
  const script = join(dir, 'relaunched.mjs');
  const seen = join(dir, 'seen.json');
  writeFileSync(
    script,
    `import { writeFileSync } from 'node:fs';
     const names = ${JSON.stringify(Object.keys(CHILD_MALLOC_ENV))};
     writeFileSync(${JSON.stringify(seen)}, JSON.stringify(names.map((name) => process.env[name])));
     process.exit(7);`,
  );
  const saved = Object.keys(CHILD_MALLOC_ENV).map((name) => [name, process.env[name]] as const);
  t.teardown(() => {
    for (const [name, value] of saved) {
      if (value === undefined) Reflect.deleteProperty(process.env, name);
      else process.env[name] = value;
    }
  });
  for (const [name] of saved) Reflect.deleteProperty(process.env, name);
  t.equal(await runBenchAsService(['--list'], [script]), 7, "the relaunched command's exit code");
  t.same(
    JSON.parse(readFileSync(seen, 'utf8')),
    Object.values(CHILD_MALLOC_ENV),
    'it ran with the settings',
  );
  rmSync(seen);
  Object.assign(process.env, CHILD_MALLOC_ENV);
  // A usage error, answered in this process (its text goes to stderr, not into TAP's stdout).
  t.equal(await runBenchAsService(['--bogus'], [script]), 2, 'with them set it runs here');
  t.notOk(existsSync(seen), 'and starts nothing');
});
