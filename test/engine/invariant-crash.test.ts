// Goal: an invariant failure inside an engine command ends the engine's process instead of
// answering and serving on (util/invariant.ts; docs/architecture.md, "Invariant failures end
// the process"): the command that failed an assertion is still answered (`internal`), then the
// process exits with the assertion; a catalogue error and a TypeError are answered and the
// engine serves on. The same holds for an item of a `putObjects` group, whose items are
// answered one by one.
// Method: this file run again as a child process (LW_ENGINE_INVARIANT_CHILD) that starts the real
// engine on a temp data directory with a command router (the seam a cluster member's commands go
// through, command-router.ts) whose commands fail as the key they are given says; the parent
// sends commands over the engine socket with an EngineClient and waits for the child's exit.
import t from 'tap';
import assert from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CommandRouter } from '../../src/engine/command-router.js';
import type { CommandArgs } from '../../src/engine/commands.js';
import { startEngine } from '../../src/engine/engine.js';
import { EngineClient } from '../../src/engine/protocol.js';
import { loadSettings } from '../../src/util/config.js';
import { BadRequest } from '../../src/util/errors.js';
import { endOnUncaughtException } from '../../src/util/fatal.js';
import { tempDir, type TapLike } from './segment-testing.js';

/** Fails as `key` says: a refusal, a TypeError, an assertion; else answers null. */
async function failAs(args: unknown): Promise<null> {
  await new Promise((resolve) => setImmediate(resolve));
  const key = (args as { key?: unknown } | undefined)?.key;
  if (key === 'refusal') throw BadRequest('a refused command');
  if (key === 'type-error') throw new TypeError('bad input to a library call');
  if (key === 'assertion') assert.fail('reference count below zero');
  return null;
}

async function child(dataDir: string): Promise<void> {
  // As lightwell-engine does (cli/child.ts): a crash during a commit must not hang in Node's exit.
  endOnUncaughtException('lightwell-engine');
  const settings = loadSettings({ flags: { data_dir: dataDir } });
  const router: CommandRouter = {
    handles: (name) => name === 'clusterFreshen' || name === 'putObject',
    run: (_name, args) => failAs(args),
    close: () => Promise.resolve(),
  };
  await startEngine({ dataDir, settings, router: () => Promise.resolve(router) });
  process.stdout.write('\nengine ready\n');
}

/** How long a child engine may take to exit once its assertion failed: less than tap's limit. */
const EXIT_WAIT_MS = 120_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * What `/proc` says of a process that should have exited: its state, and each thread's name,
 * state and the kernel function it sleeps in (a thread stuck in a system call shows there).
 */
function procReport(pid: number): string {
  const field = (text: string, name: string): string =>
    new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(text)?.[1] ?? '?';
  try {
    const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
    const threads = readdirSync(`/proc/${String(pid)}/task`).map((tid) => {
      const base = `/proc/${String(pid)}/task/${tid}`;
      const read = (name: string): string => {
        try {
          return readFileSync(`${base}/${name}`, 'utf8').trim();
        } catch {
          return '?';
        }
      };
      const threadStatus = read('status');
      return `${tid} ${read('comm')} ${field(threadStatus, 'State')} in ${read('wchan')}`;
    });
    return `state ${field(status, 'State')}; threads: ${threads.join('; ')}`;
  } catch {
    return 'not in /proc (gone)';
  }
}

/**
 * The child's exit, waited for at most EXIT_WAIT_MS; past that the child is killed and the wait
 * fails naming what it waited for: the engine's pid, whether it still ran (and its threads), the
 * end of its stderr.
 */
async function exitOf(proc: ChildProcess, exited: Promise<Exit>, what: string): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), EXIT_WAIT_MS);
  });
  const first = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (first !== 'late') return first;
  const pid = proc.pid ?? -1;
  const alive = proc.exitCode === null && proc.signalCode === null;
  const report = alive ? procReport(pid) : 'exited meanwhile';
  proc.kill('SIGKILL');
  const { stderr } = await exited;
  throw BadRequest(
    `the engine (pid ${String(pid)}) did not exit within ${String(EXIT_WAIT_MS)} ms after ` +
      `${what}; still running: ${String(alive)} (${report}); the end of its stderr:\n` +
      stderr.slice(-4_000),
  );
}

/** Starts the child engine; answers a client of it and its exit. */
async function startChild(t: TapLike): Promise<{
  client: EngineClient;
  proc: ChildProcess;
  exited: Promise<Exit>;
}> {
  const dataDir = tempDir(t, 'lw-engine-invariant-');
  const proc = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, LW_ENGINE_INVARIANT_CHILD: dataDir, TAP: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  let output = '';
  proc.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(proc, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    stderr: output,
  }));
  // Read to the end, not only until ready: an engine whose log fills an unread pipe blocks.
  let stdout = '';
  await new Promise<void>((resolve, reject) => {
    proc.stdout.on('data', (chunk: Buffer) => {
      stdout = (stdout + chunk.toString()).slice(-65_536);
      if (stdout.includes('\nengine ready\n')) resolve();
    });
    void exited.then(() =>
      reject(BadRequest(`the engine ended before it was ready: ${output}${stdout}`)),
    );
  });
  const client = new EngineClient(join(dataDir, 'engine.sock'), 30_000);
  client.stopWaiting();
  return { client, proc, exited };
}

/** The code a failed call answers (its catalogue code), or 'ok'. */
function outcome(call: Promise<unknown>): Promise<string> {
  return call.then(
    () => 'ok',
    (error: unknown) => String((error as { code?: unknown }).code),
  );
}

const target = (key: string): { tenantId: string; bucket: string; key: string } => ({
  tenantId: 't',
  bucket: 'b',
  key,
});

const childDir = process.env['LW_ENGINE_INVARIANT_CHILD'];
if (childDir !== undefined) {
  await child(childDir);
} else {
  t.test('an assertion in a command: answered, then the engine ends', async (t) => {
    const { client, proc, exited } = await startChild(t);
    t.equal(await outcome(client.call('clusterFreshen', target('refusal'))), 'bad_request');
    t.equal(await outcome(client.call('clusterFreshen', target('type-error'))), 'internal');
    t.equal(await outcome(client.call('ping', {})), 'ok', 'the engine serves on after both');
    t.equal(
      await outcome(client.call('clusterFreshen', target('assertion'))),
      'internal',
      'the failing command is still answered',
    );
    const { code, stderr } = await exitOf(proc, exited, 'the failing command was answered');
    t.not(code, 0, 'the engine exits with a failure');
    t.match(stderr, /reference count below zero/, 'with the assertion');
  });

  t.test('an assertion in an item of a put group: answered, then the engine ends', async (t) => {
    const { client, proc, exited } = await startChild(t);
    const item = (key: string): CommandArgs<'putObject'> => ({
      ...target(key),
      size: 0,
      etag: '"e"',
      contentType: 'application/octet-stream',
      metadata: {},
      checksums: {},
      compressed: false,
      chunks: [],
    });
    const answers = await client.call('putObjects', {
      items: [item('fine'), item('refusal'), item('assertion')],
    });
    t.same(
      answers.map((answer) => ('e' in answer ? answer.e.code : 'ok')),
      ['ok', 'bad_request', 'internal'],
      'every item is answered on its own',
    );
    const { code, stderr } = await exitOf(proc, exited, 'every item of the group was answered');
    t.not(code, 0, 'the engine exits with a failure');
    t.match(stderr, /reference count below zero/, 'with the assertion');
  });
}
