// Goal: the binaries behave as DECISIONS.md says a user meets them: `--help` and `-h` print a
// usage on stdout and exit 0 without starting anything (no data directory, no listener); a
// service that cannot start exits non-zero with a clear message (port taken, data directory
// locked by a running service, a data directory of an unknown format version, a bad setting
// such as `--gateways 0`), the standalone gateway and admin processes included; every binary
// refuses, with exit code 2 and one line, an argument it does not take (README, exit codes).
// Method: the compiled binaries as child processes in a temporary working directory, beside
// one real service on loopback whose data directory and ports the refusals are tried against.
import t from 'tap';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, Service, freePort } from '../helpers/service.js';

const bin = (name: string): string =>
  resolve(dirname(fileURLToPath(import.meta.url)), `../../bin/${name}.js`);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface RunOptions {
  /** Added to this process's environment. */
  readonly env?: Record<string, string>;
  /** Another user to run as (see `otherUser`). */
  readonly user?: { uid: number; gid: number } | undefined;
}

/**
 * How long a run may take before it is killed: far above a normal run on a loaded machine, and
 * below tap's limit for the file (180 s), so that a hang fails its own assertion, with what it
 * waited for on stderr, rather than tap's time-out with a dump of open handles.
 */
const RUN_LIMIT_MS = 150_000;

/** Runs a binary to its end; one that hangs is killed and says so on `stderr`. */
function run(
  script: string,
  args: readonly string[],
  cwd: string,
  options: RunOptions = {},
): Promise<Run> {
  return new Promise((resolveRun) => {
    // tap wraps every spawn to load its process-info hook through NODE_OPTIONS; the hook writes
    // files that another user cannot, so `env` takes the variable out for such a run.
    const [command, prefix] = options.user
      ? ['/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath]]
      : [process.execPath, []];
    const child = spawn(command, [...prefix, script, ...args], {
      cwd,
      stdio: 'pipe',
      env: { ...process.env, ...options.env },
      ...options.user,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const timer = setTimeout(() => {
      stderr += `\n[killed after ${RUN_LIMIT_MS / 1000} s waiting for ${script} to exit]\n`;
      child.kill('SIGKILL');
    }, RUN_LIMIT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/**
 * Root may write any directory, so a test of an unwritable one runs its binary as `nobody`
 * (65534) when it runs as root; otherwise as itself, on a directory it made read-only.
 */
const otherUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;

/** Makes `dir` unwritable for whoever `otherUser` runs as, and readable and searchable. */
function makeUnwritable(dir: string): void {
  chmodSync(dir, 0o555);
}

/**
 * `lightwell serve` until both ready lines are out (or it exits), then `whenReady` while it
 * runs, then SIGTERM: what it printed on each stream, and its exit code.
 */
function serveUntilReady(
  args: readonly string[],
  cwd: string,
  options: { env?: Record<string, string>; whenReady?: (stdout: string) => Promise<void> } = {},
): Promise<Run> {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, [CLI, 'serve', ...args], {
      cwd,
      stdio: 'pipe',
      env: { ...process.env, ...options.env },
    });
    let stdout = '';
    let stderr = '';
    let ready = false;
    const timer = setTimeout(() => {
      const what = ready ? 'serve to stop after SIGTERM' : 'both ready lines';
      stderr += `\n[killed after ${RUN_LIMIT_MS / 1000} s waiting for ${what}]\n`;
      child.kill('SIGKILL');
    }, RUN_LIMIT_MS);
    child.stdout.on('data', (data: Buffer) => {
      stdout += data.toString();
      if (ready || !stdout.includes('public listener ready')) return;
      if (!stdout.includes('admin listener ready')) return;
      ready = true;
      void (options.whenReady?.(stdout) ?? Promise.resolve()).finally(() => child.kill('SIGTERM'));
    });
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/** A listener holding a port, as another program would. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const port = await freePort();
  const server = createServer();
  await new Promise<void>((listening) => server.listen(port, '127.0.0.1', listening));
  return { port, server };
}

// Some sixty runs of the binaries, one after the other: about a minute on an idle machine and
// three on a loaded one, where the suite's limit of 180 s a file cut it short. Its own limit
// follows from its work; each run has its own, far shorter one (RUN_LIMIT_MS).
t.setTimeout(600_000);

const cwd = mkdtempSync(join(tmpdir(), 'lw-cli-'));
t.teardown(() => rmSync(cwd, { recursive: true, force: true }));

t.test('--help and -h print a usage and start nothing', async (t) => {
  const cases: Array<[string, string[], RegExp]> = [
    [CLI, ['--help'], /usage: lightwell serve/],
    [CLI, ['help'], /usage: lightwell serve/],
    [CLI, ['serve', '--help'], /usage: lightwell serve[\s\S]*--gateways N/],
    [CLI, ['serve', '-h'], /usage: lightwell serve/],
    [CLI, ['admin-token', '--help'], /usage: lightwell admin-token create/],
    [bin('lightwell-engine'), ['--help'], /usage: lightwell-engine[\s\S]*--data-dir DIR/],
    [bin('lightwell-gateway'), ['-h'], /usage: lightwell-gateway/],
    [bin('lightwell-admin'), ['--help'], /usage: lightwell-admin/],
  ];
  for (const [script, args, usage] of cases) {
    const name = `${script.split('/').pop() ?? ''} ${args.join(' ')}`;
    const result = await run(script, args, cwd);
    t.equal(result.code, 0, `${name}: exit 0`);
    t.match(result.stdout, usage, `${name}: the usage on stdout`);
  }
  t.notOk(existsSync(join(cwd, 'data')), 'no data directory was created');
});

t.test('output into a pipe closed early ends quietly', async (t) => {
  const child = spawn(process.execPath, [CLI, '--help'], { cwd, stdio: 'pipe' });
  child.stdout.destroy(); // the reader is gone before anything is written: EPIPE
  let stderr = '';
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  const code = await new Promise<number | null>((exited) => child.on('exit', exited));
  t.equal(code, 0, 'exit 0');
  t.equal(stderr, '', 'no stack trace');
});

t.test('wrong arguments are refused with a message and exit code 2', async (t) => {
  let result = await run(CLI, ['nonsense'], cwd);
  t.equal(result.code, 2, 'an unknown command');
  t.match(result.stderr, /unknown command nonsense/);
  result = await run(CLI, [], cwd);
  t.equal(result.code, 2, 'no command');
  t.match(result.stderr, /^usage: lightwell serve/);
  result = await run(CLI, ['serve', '--data-dir', join(cwd, 'u'), '--bogus'], cwd);
  t.equal(result.code, 2, 'an unknown option given last');
  t.equal(
    result.stderr,
    'lightwell serve: unknown option --bogus (lightwell serve --help lists the options)\n',
  );
  result = await run(CLI, ['serve', '--data-dir'], cwd);
  t.equal(result.code, 2, 'a known option without its value');
  t.match(result.stderr, /--data-dir needs a value/);
  // Each of these used to be ignored: serve ran on ./data, with the argument dropped.
  const ignored: Array<[string, string[], RegExp]> = [
    [CLI, ['serve', '-d', join(cwd, 'x')], /^lightwell serve: unknown option -d /],
    [CLI, ['serve', join(cwd, 'x')], /^lightwell serve: unexpected argument \//],
    [CLI, ['serve', '--json'], /^lightwell serve: unknown option --json /],
    [CLI, ['serve', '--quick'], /^lightwell serve: unknown option --quick /],
    [CLI, ['serve', '--help=yes'], /^lightwell serve: --help takes no value /],
    [bin('lightwell-engine'), ['-d', join(cwd, 'x')], /^lightwell-engine: unknown option -d /],
    [bin('lightwell-gateway'), ['--json'], /^lightwell-gateway: unknown option --json /],
    [bin('lightwell-admin'), ['start'], /^lightwell-admin: unexpected argument start /],
    [CLI, ['admin-token', 'list', '-j'], /^lightwell admin-token: unknown option -j /],
    [CLI, ['admin-token', 'list', '--role', 'owner'], /--role is an option of .* create only/],
  ];
  for (const [script, args, message] of ignored) {
    const name = `${script.split('/').pop() ?? ''} ${args.join(' ')}`;
    result = await run(script, args, cwd);
    t.equal(result.code, 2, `${name}: exit 2`);
    t.match(result.stderr, message, `${name}: says which argument`);
    t.equal(result.stderr.split('\n').length, 2, `${name}: in one line`);
  }
  for (const gateways of ['0', '-1', '65']) {
    result = await run(CLI, ['serve', '--data-dir', join(cwd, 'g'), '--gateways', gateways], cwd);
    t.equal(result.code, 1, `--gateways ${gateways}: a bad value, not a usage error`);
    t.match(result.stderr, /gateways: expected an integer from 1 to 64/);
  }
  const dataDir = join(cwd, 'tokens');
  result = await run(
    CLI,
    ['admin-token', 'create', '--data-dir', dataDir, '--role', 'owner', 'x'],
    cwd,
  );
  t.equal(result.code, 2, 'admin-token create with a stray argument');
  t.match(result.stderr, /usage: lightwell admin-token/);
  result = await run(CLI, ['admin-token', 'revoke', '--data-dir', dataDir], cwd);
  t.equal(result.code, 2, 'admin-token revoke without an id');
  const created = await run(
    CLI,
    ['admin-token', 'create', '--data-dir', join(cwd, 'revoke-tokens'), '--role', 'viewer'],
    cwd,
  );
  const token = created.stdout.trim().split('\n').pop() ?? '';
  t.match(token, /^lwadm_/);
  result = await run(
    CLI,
    ['admin-token', 'revoke', '--data-dir', join(cwd, 'revoke-tokens'), token],
    cwd,
  );
  t.equal(result.code, 2, 'admin-token revoke given the token instead of its id');
  t.match(result.stderr, /that is a token, not a token id/);
  t.notMatch(result.stderr, token, 'the token is not echoed');
  result = await run(CLI, ['admin-token'], cwd);
  t.equal(result.code, 2, 'admin-token without an action');
  result = await run(CLI, ['admin-token', 'create', '--data-dir', dataDir], cwd);
  t.equal(result.code, 2, 'admin-token create without --role');
  t.match(result.stderr, /--role must be viewer, operator or owner/);
  t.notOk(existsSync(dataDir), 'no refused command created its data directory');
  t.notOk(existsSync(join(cwd, 'data')), 'nor ./data');
});

t.test('a bad setting is refused in one line before anything starts', async (t) => {
  const dir = join(cwd, 'settings');
  mkdirSync(dir);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ data_dir: '' }));
  const cases: Array<[string, string[], Record<string, string>, string]> = [
    [
      CLI,
      ['serve', '--log-level', 'verbose'],
      {},
      'lightwell: cannot start: log.level: expected one of fatal, error, warn, info, debug, ' +
        'trace, silent, got "verbose"',
    ],
    [
      bin('lightwell-engine'),
      ['--log-level', 'verbose'],
      {},
      'lightwell-engine: cannot start: log.level: expected one of fatal, error, warn, info, ' +
        'debug, trace, silent, got "verbose"',
    ],
    [CLI, ['serve', '--data-dir='], {}, 'lightwell: cannot start: data_dir must not be empty'],
    [CLI, ['serve', '--data-dir', ''], {}, 'lightwell: cannot start: data_dir must not be empty'],
    [
      CLI,
      ['admin-token', 'create', '--role', 'owner', '--config', config],
      {},
      `lightwell admin-token: data_dir must not be empty (from config file ${config})`,
    ],
    [
      CLI,
      ['serve'],
      { LIGHTWELL_GATEWAYS: 'abc' },
      'lightwell: cannot start: gateways: expected an integer, got "abc" ' +
        '(from environment variable LIGHTWELL_GATEWAYS)',
    ],
    [
      CLI,
      ['serve', '--tls.cert_file', '/etc/hostname'],
      {},
      'lightwell: cannot start: tls.cert_file and tls.key_file go together: set both to serve ' +
        'HTTPS, or neither',
    ],
    [
      bin('lightwell-admin'),
      [],
      { LIGHTWELL_TLS_KEY_FILE: '/etc/hostname' },
      'lightwell-admin: cannot start: tls.cert_file and tls.key_file go together: set both to ' +
        'serve HTTPS, or neither',
    ],
    [
      CLI,
      ['admin-token', 'create', '--role', 'owner', '--name', 'a\tforged\trow'],
      {},
      'lightwell admin-token: --name must not contain control characters or line separators ' +
        '(U+0000 to U+001F, U+007F to U+009F, U+2028, U+2029); found U+0009',
    ],
  ];
  for (const [script, args, env, message] of cases) {
    const name = `${script.split('/').pop() ?? ''} ${args.join(' ')}`;
    const result = await run(script, args, dir, { env });
    t.equal(result.code, 1, `${name}: exit 1`);
    t.equal(result.stderr, `${message}\n`, `${name}: one line, no stack`);
  }
  t.same(readdirSync(dir), ['config.json'], 'nothing was created in the working directory');
});

t.test('a service that cannot start says why and exits 1', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.stop());
  const held = await holdPort();
  t.teardown(() => held.server.close());
  const listen = (port: number): string => `127.0.0.1:${port}`;

  /** `lightwell serve` on `dataDir`, with free ports unless the public one is given. */
  const serve = async (dataDir: string, publicPort?: number): Promise<Run> =>
    run(
      CLI,
      [
        'serve',
        '--data-dir',
        dataDir,
        '--public-listen',
        listen(publicPort ?? (await freePort())),
        '--admin-listen',
        listen(await freePort()),
      ],
      cwd,
    );

  let result = await serve(service.dataDir);
  t.equal(result.code, 1, 'a second serve on a running data directory');
  t.match(result.stderr, /cannot start: data directory .* is locked by running process \d+/);

  result = await serve(join(cwd, 'fresh'), held.port);
  t.equal(result.code, 1, 'serve on a taken public port');
  t.match(result.stderr, new RegExp(`public address 127.0.0.1:${held.port} is not available`));
  t.notOk(existsSync(join(cwd, 'fresh')), 'the refused start created no data directory');

  // The standalone processes, against the running engine, on a taken port.
  result = await run(
    bin('lightwell-gateway'),
    ['--data-dir', service.dataDir, '--public-listen', listen(held.port), '--log-level', 'warn'],
    cwd,
  );
  t.equal(result.code, 1, 'lightwell-gateway on a taken port exits');
  t.match(result.stderr, /lightwell-gateway: cannot start: .*127\.0\.0\.1:\d+/);
  result = await run(
    bin('lightwell-admin'),
    ['--data-dir', service.dataDir, '--admin-listen', listen(held.port), '--log-level', 'warn'],
    cwd,
  );
  t.equal(result.code, 1, 'lightwell-admin on a taken port exits');
  t.match(result.stderr, /lightwell-admin: cannot start: .*127\.0\.0\.1:\d+/);

  // A data directory written by a newer release: its FORMAT marker names version 2.
  const newer = join(cwd, 'newer');
  t.equal(
    (await run(CLI, ['admin-token', 'create', '--role', 'viewer', '--data-dir', newer], cwd)).code,
    0,
  );
  const marker = readFileSync(join(newer, 'FORMAT'));
  marker.writeUInt16LE(2, 8);
  writeFileSync(join(newer, 'FORMAT'), marker);
  result = await serve(newer);
  t.equal(result.code, 1, 'serve on a data directory of an unknown format version');
  t.match(
    result.stderr,
    /cannot start: data directory has format version 2; this release reads format versions up to 1\n/,
  );
  // Started on their own, the gateway and the admin process read FORMAT first too, instead of
  // waiting for an engine that refuses the directory.
  for (const name of ['lightwell-gateway', 'lightwell-admin']) {
    const listen = name === 'lightwell-gateway' ? '--public-listen' : '--admin-listen';
    result = await run(bin(name), ['--data-dir', newer, listen, '127.0.0.1:0'], cwd);
    t.equal(result.code, 1, `${name} on a data directory of an unknown format version`);
    t.match(
      result.stderr,
      new RegExp(`^${name}: cannot start: data directory has format version 2; this release`),
    );
  }
});

t.test('stdout carries the ready lines only; logs go to stderr', async (t) => {
  const dataDir = join(cwd, 'quiet-stdout');
  const listen = async (): Promise<string> => `127.0.0.1:${await freePort()}`;
  const result = await serveUntilReady(
    [
      '--data-dir',
      dataDir,
      '--public-listen',
      await listen(),
      '--admin-listen',
      await listen(),
      '--log-level',
      'info',
    ],
    cwd,
  );
  t.equal(result.code, 0, 'serve started and stopped cleanly');
  t.match(
    result.stdout,
    /^lightwell: public listener ready on http:\/\/127\.0\.0\.1:\d+\/api\/v1\n/,
  );
  t.same(
    result.stdout.split('\n').filter((line) => line !== '' && !/listener ready on/.test(line)),
    [],
    'nothing else on stdout',
  );
  t.match(result.stderr, /"msg":"engine ready"/, 'the engine logs on stderr');
  t.match(result.stderr, /"msg":"gateway listening"/, 'the gateway logs on stderr');

  // A process on its own: its ready line alone on stdout, its logs on stderr.
  const engine = spawn(
    process.execPath,
    [bin('lightwell-engine'), '--data-dir', dataDir, '--log-level', 'info'],
    { cwd, stdio: 'pipe' },
  );
  let stdout = '';
  let stderr = '';
  engine.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  engine.stdout.on('data', (data: Buffer) => {
    stdout += data.toString();
    if (stdout.includes('ready')) engine.kill('SIGTERM');
  });
  const code = await new Promise<number | null>((exited) => engine.on('exit', exited));
  t.equal(code, 0, 'lightwell-engine started and stopped');
  t.equal(stdout, 'lightwell-engine: ready\n', 'lightwell-engine: only its ready line on stdout');
  t.match(stderr, /"msg":"engine ready"/, 'lightwell-engine logs on stderr');
});

t.test('an unusable data directory is named in one line', async (t) => {
  // Others (nobody, when this runs as root) must reach the directories below.
  const dir = join(cwd, 'unusable');
  mkdirSync(dir, { mode: 0o755 });
  chmodSync(cwd, 0o755);
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  let result = await run(CLI, ['serve', '--data-dir', file], dir);
  t.equal(result.code, 1, 'serve on a regular file');
  t.equal(result.stderr, `lightwell: cannot start: ${file} is not a directory\n`);
  result = await run(
    CLI,
    ['admin-token', 'create', '--role', 'owner', '--data-dir', join(file, 'x')],
    dir,
  );
  t.equal(result.code, 1, 'admin-token create below a regular file');
  t.equal(result.stderr, `lightwell admin-token: ${file} is not a directory\n`);

  const locked = join(dir, 'read-only');
  mkdirSync(locked, { mode: 0o755 });
  makeUnwritable(locked);
  const uid = otherUser?.uid ?? process.getuid?.() ?? -1;
  const unwritable = (path: string): RegExp =>
    new RegExp(
      `^${escapeRegExp(path)} is not writable by uid ${uid} \\(owned by uid \\d+\\): the whole ` +
        'data directory must belong to the user the service runs as \\(chown -R\\)\\n$',
    );
  for (const target of [locked, join(locked, 'new')]) {
    result = await run(CLI, ['serve', '--data-dir', target], dir, { user: otherUser });
    t.equal(result.code, 1, `serve on ${target}`);
    t.match(result.stderr.replace('lightwell: cannot start: ', ''), unwritable(locked));
  }
  result = await run(bin('lightwell-engine'), ['--data-dir', locked], dir, { user: otherUser });
  t.equal(result.code, 1, 'lightwell-engine on an unwritable directory');
  t.match(result.stderr.replace('lightwell-engine: cannot start: ', ''), unwritable(locked));

  // A directory the service can write, with a keys/ it cannot: named before anything starts.
  const keysLocked = join(dir, 'keys-locked');
  mkdirSync(join(keysLocked, 'keys'), { recursive: true, mode: 0o755 });
  if (otherUser) chownSync(keysLocked, otherUser.uid, otherUser.gid);
  makeUnwritable(join(keysLocked, 'keys'));
  result = await run(bin('lightwell-engine'), ['--data-dir', keysLocked], dir, {
    user: otherUser,
  });
  t.equal(result.code, 1, 'lightwell-engine that cannot write its master key');
  t.match(
    result.stderr.replace('lightwell-engine: cannot start: ', ''),
    unwritable(join(keysLocked, 'keys')),
  );

  // The common case: `admin-token create` run as root before the service's user owns only the
  // top directory. The index it made is named, in one line, by every command.
  if (otherUser) {
    const handed = join(dir, 'handed-over');
    result = await run(
      CLI,
      ['admin-token', 'create', '--role', 'owner', '--data-dir', handed],
      dir,
    );
    t.equal(result.code, 0);
    chownSync(handed, otherUser.uid, otherUser.gid);
    result = await run(CLI, ['admin-token', 'list', '--data-dir', handed], dir, {
      user: otherUser,
    });
    t.equal(result.code, 1, 'admin-token list on a root-owned index');
    t.match(
      result.stderr.replace('lightwell admin-token: ', ''),
      unwritable(join(handed, 'index')),
    );
    result = await run(CLI, ['serve', '--data-dir', handed], dir, { user: otherUser });
    t.equal(result.code, 1, 'serve on a root-owned index');
    t.match(
      result.stderr.replace('lightwell: cannot start: ', ''),
      unwritable(join(handed, 'index')),
    );
  }
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

t.test(
  'admin-token list and revoke need an existing data directory; create makes one',
  async (t) => {
    const missing = join(cwd, 'no-tokens-here');
    const empty = join(cwd, 'empty-dir');
    mkdirSync(empty);
    for (const dir of [missing, empty]) {
      for (const args of [['list'], ['list', '--json'], ['revoke', 'lwadm_x']]) {
        const result = await run(CLI, ['admin-token', ...args, '--data-dir', dir], cwd);
        t.equal(result.code, 1, `${args.join(' ')} on ${dir}`);
        t.equal(result.stdout, '', 'prints no token list');
        t.equal(result.stderr, `lightwell admin-token: no Lightwell data directory at ${dir}\n`);
      }
    }
    t.notOk(existsSync(missing), 'the missing directory was not created');
    t.same(readdirSync(empty), [], 'nothing was written into the empty one');
    const created = await run(
      CLI,
      ['admin-token', 'create', '--role', 'owner', '--data-dir', missing],
      cwd,
    );
    t.equal(created.code, 0, 'create makes the data directory');
    const listed = await run(CLI, ['admin-token', 'list', '--json', '--data-dir', missing], cwd);
    t.equal(listed.code, 0, 'list then reads it');
    t.equal((JSON.parse(listed.stdout) as { tokens: unknown[] }).tokens.length, 1);
  },
);

t.test('serve prints its ready lines once every process is ready', async (t) => {
  const dataDir = join(cwd, 'start-up');
  const port = await freePort();
  // Public and admin on one address: refused before anything starts or is created.
  let result = await run(
    CLI,
    [
      'serve',
      '--data-dir',
      dataDir,
      '--public-listen',
      `127.0.0.1:${port}`,
      '--admin-listen',
      `127.0.0.1:${port}`,
    ],
    cwd,
  );
  t.equal(result.code, 1, 'one address for both listeners');
  t.equal(
    result.stderr,
    `lightwell: cannot start: public_listen 127.0.0.1:${port} and admin_listen ` +
      `127.0.0.1:${port} overlap: give the listeners different ports\n`,
  );
  result = await run(
    CLI,
    ['serve', '--data-dir', dataDir, '--public-listen', `0.0.0.0:${port}`],
    cwd,
    { env: { LIGHTWELL_ADMIN_LISTEN: `127.0.0.1:${port}` } },
  );
  t.equal(result.code, 1, 'a wildcard public listener on the admin port');
  t.match(result.stderr, /overlap/);
  result = await run(
    CLI,
    ['serve', '--data-dir', dataDir, '--public-listen', `localhost:${port}`],
    cwd,
    { env: { LIGHTWELL_ADMIN_LISTEN: `127.0.0.1:${port}` } },
  );
  t.equal(result.code, 1, 'two names of one address');
  t.match(result.stderr, /public_listen localhost:\d+ and admin_listen 127\.0\.0\.1:\d+ overlap/);
  t.notOk(existsSync(dataDir), 'no data directory was created');

  // A gateway that exits during the start (Node exits it before Lightwell's code runs): the
  // engine and the admin process were ready, but the start fails, with no ready line and no
  // restart.
  const exitGateway =
    '--import=data:text/javascript,if(process.argv[1].includes("gateway"))process.exit(3)';
  result = await serveUntilReady(
    ['--data-dir', dataDir, '--public-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
    cwd,
    { env: { LIGHTWELL_CHILD_NODE_ARGS: exitGateway } },
  );
  t.equal(result.code, 1, 'a child that exits during the start fails it');
  t.equal(result.stdout, '', 'no ready line');
  t.notMatch(result.stderr, /restarting/, 'no restart');
  t.match(result.stderr, /lightwell: cannot start: gateway-1 exited \(3\) during start\n/);

  // Port 0: the lines show the ports bound. Two gateways share the public one (the second
  // could not start on a port the first bound without SO_REUSEPORT).
  result = await serveUntilReady(
    [
      '--data-dir',
      dataDir,
      '--public-listen',
      '127.0.0.1:0',
      '--admin-listen',
      '127.0.0.1:0',
      '--gateways',
      '2',
    ],
    cwd,
    {
      whenReady: async (stdout) => {
        const ports = [...stdout.matchAll(/127\.0\.0\.1:(\d+)/g)].map((match) => Number(match[1]));
        t.equal(ports.length, 2, 'two ready lines');
        t.ok(
          ports.every((bound) => bound > 0),
          `ports bound: ${ports.join(', ')}`,
        );
        const [publicPort = 0, adminPort = 0] = ports;
        const health = async (url: string): Promise<number> => (await fetch(url)).status;
        for (let index = 0; index < 4; index += 1)
          t.equal(await health(`http://127.0.0.1:${publicPort}/api/v1/healthz`), 200);
        t.equal(await health(`http://127.0.0.1:${adminPort}/admin/api/v1/healthz`), 200);
      },
    },
  );
  t.equal(result.code, 0, 'started and stopped');
  t.match(
    result.stdout,
    new RegExp(
      '^lightwell: public listener ready on http://127\\.0\\.0\\.1:[1-9]\\d*/api/v1\n' +
        'lightwell: admin listener ready on http://127\\.0\\.0\\.1:[1-9]\\d*/admin/api/v1\n$',
    ),
    'the public line, then the admin line, and nothing else',
  );
});

t.test('a TLS certificate that cannot be loaded is named in one line', async (t) => {
  const missing = join(cwd, 'no-such-tls');
  const result = await run(
    CLI,
    [
      'serve',
      '--data-dir',
      join(cwd, 'tls'),
      '--public-listen',
      '127.0.0.1:0',
      '--admin-listen',
      '127.0.0.1:0',
      '--tls.cert_file',
      join(missing, 'cert.pem'),
      '--tls.key_file',
      join(missing, 'key.pem'),
      '--log-level',
      'warn',
    ],
    cwd,
  );
  t.equal(result.code, 1, 'serve does not start');
  t.match(
    result.stderr,
    new RegExp(
      `lightwell-(gateway|admin): cannot start: cannot load the TLS certificate ` +
        `${missing}/cert\\.pem with the key ${missing}/key\\.pem\\n`,
    ),
  );
  t.notMatch(result.stderr, /\n\s+at /, 'no stack');
});
