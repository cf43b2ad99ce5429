// Goal: the start-up traps a new user fell into are closed. `serve` on port 0 starts with any
// number of listener threads; a standalone gateway refuses a port that a gateway of another
// data directory serves (SO_REUSEPORT had let it share, and requests then landed on either
// store), and shares one of its own directory's; a data directory whose parent does not exist
// is refused and a new one is announced (stderr and log); a ratio setting that is not a number
// fails the start naming the setting; a standalone gateway or admin process on a path with no
// store says so at once; each binary's `--help` lists only the flags it reads, and `--version`
// answers on every binary; `lightwell config` lists every setting with its source, and
// `--check` validates a config file without starting anything.
// Method: the compiled binaries as child processes on loopback, each run killed (and the test
// failed with what it waited for) only past a limit far above any normal run.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, freePort } from '../helpers/service.js';

const bin = (name: string): string =>
  resolve(dirname(fileURLToPath(import.meta.url)), `../../bin/${name}.js`);

/** Far above a normal run on a loaded machine, and below tap's own limit for the file. */
const RUN_LIMIT_MS = 120_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const cwd = mkdtempSync(join(tmpdir(), 'lw-start-'));
t.teardown(() => rmSync(cwd, { recursive: true, force: true }));

/** Runs a binary to its end; a run that hangs fails with what it was waiting for. */
function run(script: string, args: readonly string[], what: string): Promise<Run> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [script, ...args], { cwd, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`waited ${RUN_LIMIT_MS / 1000} s for ${what} to exit; stderr: ${stderr}`));
    }, RUN_LIMIT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/** A running binary, once it printed `until` on stdout. */
interface Started {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  /** Resolves with the exit code once it has exited. */
  readonly exited: Promise<number | null>;
}

function startUntil(script: string, args: readonly string[], until: RegExp): Promise<Started> {
  const child = spawn(process.execPath, [script, ...args], { cwd, stdio: 'pipe' });
  const started: Started = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolveExit) => child.once('exit', resolveExit)),
  };
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `waited ${RUN_LIMIT_MS / 1000} s for ${String(until)} on stdout: ${started.stderr}`,
        ),
      );
    }, RUN_LIMIT_MS);
    child.stdout.on('data', (data: Buffer) => {
      started.stdout += data.toString();
      if (!until.test(started.stdout)) return;
      clearTimeout(timer);
      resolveStart(started);
    });
    child.stderr.on('data', (data: Buffer) => (started.stderr += data.toString()));
    void started.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${String(code)}) before ${String(until)}: ${started.stderr}`));
    });
  });
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill('SIGTERM');
  return started.exited;
}

const READY = /public listener ready.*\n.*admin listener ready.*\n/;

t.test('serve on port 0 with two listener threads, and a new store is announced', async (t) => {
  const dataDir = join(cwd, 'port-zero');
  const args = ['serve', '--data-dir', dataDir, '--public-listen', '127.0.0.1:0'];
  const serve = await startUntil(
    CLI,
    [...args, '--admin-listen', '127.0.0.1:0', '--gateway-threads', '2', '--workers', '1'],
    READY,
  );
  const port = /public listener ready on http:\/\/127\.0\.0\.1:(\d+)/.exec(serve.stdout)?.[1];
  t.ok(Number(port) > 0, `public port ${String(port)}`);
  // Several connections, which the kernel spreads among the two threads.
  for (let index = 0; index < 6; index += 1) {
    const answer = await fetch(`http://127.0.0.1:${String(port)}/api/v1/healthz`, {
      headers: { connection: 'close' },
    });
    t.equal(answer.status, 200, `request ${index}`);
  }
  // The node's address in the membership is the admin port bound, not the `:0` asked for.
  const adminPort = /admin listener ready on http:\/\/127\.0\.0\.1:(\d+)/.exec(serve.stdout)?.[1];
  const minted = await run(
    CLI,
    ['admin-token', 'create', '--role', 'viewer', '--data-dir', dataDir],
    'admin-token create',
  );
  const token = minted.stdout.trim().split('\n').at(-1) ?? '';
  const membership = await fetch(
    `http://127.0.0.1:${String(adminPort)}/admin/api/v1/cluster/consensus/membership`,
    { headers: { authorization: `Bearer ${token}` } },
  );
  t.match(await membership.json(), { members: [{ address: `127.0.0.1:${String(adminPort)}` }] });
  t.equal(await stop(serve), 0, 'stops cleanly');
  t.match(serve.stderr, `lightwell: created a new, empty data directory at ${dataDir}`);
  t.match(serve.stderr, /"level":40.*created a new, empty data directory/, 'and a log record');
  const again = await startUntil(CLI, [...args, '--admin-listen', '127.0.0.1:0'], READY);
  t.equal(await stop(again), 0);
  t.notMatch(again.stderr, /created a new/, 'an existing store is not announced');
});

t.test('a data directory whose parent does not exist is never created', async (t) => {
  const missing = join(cwd, 'typo', 'data');
  const serve = await run(CLI, ['serve', '--data-dir', missing], 'serve');
  t.equal(serve.code, 1);
  t.equal(
    serve.stderr,
    `lightwell: cannot start: ${join(cwd, 'typo')} does not exist, so no data directory is ` +
      `created at ${missing}: check --data-dir, or create the parent directory first\n`,
  );
  const token = await run(
    CLI,
    ['admin-token', 'create', '--role', 'owner', '--data-dir', missing],
    'admin-token create',
  );
  t.equal(token.code, 1);
  t.equal(token.stdout, '', 'no token');
  t.match(token.stderr, /^lightwell admin-token: .*typo does not exist/);
  t.notOk(existsSync(join(cwd, 'typo')), 'nothing was created');
  const fresh = join(cwd, 'fresh');
  const created = await run(
    CLI,
    ['admin-token', 'create', '--role', 'owner', '--data-dir', fresh],
    'admin-token create',
  );
  t.equal(created.code, 0);
  t.match(created.stderr, `lightwell admin-token: created a new, empty data directory at ${fresh}`);
});

t.test('a setting of the wrong type fails the start, naming the setting', async (t) => {
  const dataDir = join(cwd, 'banana');
  for (const [args, message] of [
    [['--storage.compaction_live_ratio', 'banana'], /storage\.compaction_live_ratio: expected a/],
    [['--storage.compaction_live_ratio', '2'], /storage\.compaction_live_ratio: expected a/],
    [['--shutdown.grace', 'soon'], /shutdown\.grace: expected a duration/],
  ] as const) {
    const result = await run(CLI, ['serve', '--data-dir', dataDir, ...args], 'serve');
    t.equal(result.code, 1, args.join(' '));
    t.match(result.stderr, message);
  }
  t.notOk(existsSync(dataDir), 'nothing was created');
});

t.test('a standalone gateway or admin process with no store there says so', async (t) => {
  const empty = mkdtempSync(join(cwd, 'empty-'));
  for (const name of ['lightwell-gateway', 'lightwell-admin']) {
    const result = await run(
      bin(name),
      ['--data-dir', empty, '--public-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
      name,
    );
    t.equal(result.code, 1, name);
    t.match(
      result.stderr,
      new RegExp(
        `^${name}: cannot start: no Lightwell data directory at ${empty} and no engine ` +
          `running on it: .*start lightwell-engine --data-dir`,
      ),
    );
  }
});

t.test('a gateway refuses a port that another data directory serves', async (t) => {
  const [publicPort, adminPort] = [await freePort(), await freePort()];
  const storeA = join(cwd, 'store-a');
  const serveA = await startUntil(
    CLI,
    [
      'serve',
      '--data-dir',
      storeA,
      '--public-listen',
      `127.0.0.1:${publicPort}`,
      '--admin-listen',
      `127.0.0.1:${adminPort}`,
      '--gateway-threads',
      '1',
      '--workers',
      '1',
    ],
    READY,
  );
  const storeB = join(cwd, 'store-b');
  const engineB = await startUntil(bin('lightwell-engine'), ['--data-dir', storeB], /ready/);
  const common = ['--public-listen', `127.0.0.1:${publicPort}`, '--gateway-threads', '1'];
  const refused = await run(
    bin('lightwell-gateway'),
    ['--data-dir', storeB, ...common, '--workers', '1'],
    'the gateway of store B',
  );
  t.equal(refused.code, 1, 'store B may not share store A’s port');
  t.match(
    refused.stderr,
    `lightwell-gateway: cannot start: public address 127.0.0.1:${publicPort} is already in ` +
      `use, and not by a gateway of data directory ${storeB}`,
  );
  // Another gateway of store A shares the port, as serve's own gateways do.
  const joined = await startUntil(
    bin('lightwell-gateway'),
    ['--data-dir', storeA, ...common, '--workers', '1'],
    /ready on port/,
  );
  t.match(joined.stdout, `ready on port ${publicPort}`);
  t.equal(await stop(joined), 0, 'the second gateway of store A stops');
  t.equal(await stop(engineB), 0);
  t.equal(await stop(serveA), 0);
});

t.test('each binary lists only its own flags, and says its version', async (t) => {
  const lists = {
    'lightwell-engine': { has: [], lacks: ['--public-listen', '--admin-listen', '--gateway'] },
    'lightwell-gateway': {
      has: ['--public-listen', '--gateway-threads'],
      lacks: ['--admin-listen', '--gateways '],
    },
    'lightwell-admin': { has: ['--admin-listen'], lacks: ['--public-listen', '--gateway'] },
  };
  for (const [name, { has, lacks }] of Object.entries(lists)) {
    const help = await run(bin(name), ['--help'], `${name} --help`);
    t.equal(help.code, 0);
    for (const flag of ['--data-dir', '--config', '--version', ...has])
      t.match(help.stdout, flag, `${name} lists ${flag}`);
    for (const flag of lacks) t.notMatch(help.stdout, flag, `${name} does not list ${flag}`);
    const version = await run(bin(name), ['--version'], `${name} --version`);
    t.equal(version.code, 0);
    t.match(version.stdout, new RegExp(`^${name} \\d+\\.\\d+\\.\\d+ \\(data format \\d+, `));
  }
  const serveHelp = await run(CLI, ['serve', '--help'], 'serve --help');
  for (const flag of ['--public-listen', '--admin-listen', '--gateways', '--gateway-threads'])
    t.match(serveHelp.stdout, flag);
  for (const args of [['--version'], ['serve', '--version']]) {
    const version = await run(CLI, args, `lightwell ${args.join(' ')}`);
    t.equal(version.code, 0);
    t.match(version.stdout, /^lightwell \d+\.\d+\.\d+ \(data format \d+, node v\d+/);
  }
});

t.test('lightwell config lists every setting; --check validates a file', async (t) => {
  const file = join(cwd, 'lightwell.toml');
  writeFileSync(file, '# a comment\ngateways = 2\n[storage]\ncompaction_live_ratio = 0.3\n');
  const listed = await run(
    CLI,
    ['config', '--config', file, '--log-level', 'warn', '--json'],
    'lightwell config',
  );
  t.equal(listed.code, 0);
  const rows = (JSON.parse(listed.stdout) as { settings: Array<Record<string, string>> }).settings;
  const row = (name: string): Record<string, string> | undefined =>
    rows.find((entry) => entry['name'] === name);
  t.match(row('gateways'), { value: '2', default: '1', source: 'file' });
  t.match(row('storage.compaction_live_ratio'), { value: '0.3', source: 'file' });
  t.match(row('log.level'), { value: 'warn', default: 'info', source: 'flag' });
  t.match(row('shutdown.grace'), { value: '30s', source: 'default' });
  t.ok(rows.length >= 30, `${rows.length} settings`);
  const table = await run(CLI, ['config'], 'lightwell config');
  t.match(table.stdout, /^NAME +VALUE +DEFAULT +SOURCE\n/);
  t.match(table.stdout, /\nlog\.access +false +false +default\n/);

  const checked = await run(CLI, ['config', '--check', '--config', file], 'config --check');
  t.equal(checked.code, 0);
  t.equal(checked.stdout, `lightwell config: ok (${file})\n`);
  writeFileSync(file, '[storage]\ncompaction_live_ratio = "banana"\n');
  const bad = await run(CLI, ['config', '--check', '--config', file], 'config --check');
  t.equal(bad.code, 1);
  t.equal(bad.stdout, '');
  t.match(bad.stderr, /^lightwell config: storage\.compaction_live_ratio: expected a number/);
  t.match(bad.stderr, `(from config file ${file})`);
});
