// Goal: `lightwell bench` is the benchmark: the binary lists it in its usage, hands it every
// flag, exits with its code (0, 1 for a wrong byte, 2 for a usage error), and works from any
// directory, writing to ./lightwell-bench there unless --out says otherwise (in a Lightwell
// checkout too: the committed docs/benchmarks only with --out).
// Method: run dist/bin/lightwell.js as a child process from a temp directory, with the `test`
// profile against the fake Lightwell of fixtures/.

import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultOutDir } from '../../bench/run.js';
import type { BenchReport } from '../../bench/report.js';

const cliPath = fileURLToPath(new URL('../../bin/lightwell.js', import.meta.url));
const fake = fileURLToPath(new URL('./fixtures/fake-lightwell.js', import.meta.url));
const repo = fileURLToPath(new URL('../../../', import.meta.url));

const tempDirs: string[] = [];
t.teardown(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lw-bench-cli-'));
  tempDirs.push(dir);
  return dir;
}

interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function lightwell(args: string[], cwd: string, env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const tiny = ['--profile', 'test', '--lightwell-bin', fake, '--skip-limits'];

t.test('the usage lists bench; bench --help, --list and a bad flag', async (t) => {
  const cwd = tempDir();
  const usage = await lightwell(['--help'], cwd);
  t.equal(usage.code, 0);
  t.match(usage.stdout, /lightwell bench \[--quick\]/);
  const help = await lightwell(['bench', '--help'], cwd);
  t.equal(help.code, 0);
  t.match(help.stdout, /Usage: lightwell bench \[options\]/);
  t.match(help.stdout, /--endpoint URL/);
  const list = await lightwell(['bench', '--list'], cwd);
  t.equal(list.code, 0);
  t.match(list.stdout, /put-4k-c64/);
  const bad = await lightwell(['bench', '--bogus'], cwd);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--bogus/);
});

t.test('a run from a directory that is not a checkout writes ./lightwell-bench', async (t) => {
  const cwd = tempDir();
  const run = await lightwell(['bench', ...tiny, '--only', 'put-4k-c64,get-4k-c64'], cwd);
  t.equal(run.code, 0, 'exits 0', { stderr: run.stderr });
  const dir = join(cwd, 'lightwell-bench');
  const report = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as BenchReport;
  const statuses = report.scenarios.map((s) => [s.name, s.status]);
  t.same(statuses, [
    ['put-4k-c64', 'ok'],
    ['get-4k-c64', 'ok'],
  ]);
  t.match(readFileSync(join(dir, 'results.md'), 'utf8'), '| put-4k-c64 | ok |');
  t.match(run.stdout, `Wrote ${join(dir, 'results.json')}`);
});

t.test('a wrong byte exits 1, into the --out given', async (t) => {
  const cwd = tempDir();
  const out = join(cwd, 'nested', 'results');
  const run = await lightwell(['bench', ...tiny, '--only', 'get-4k-c64', '--out', out], cwd, {
    FAKE_CORRUPT_GET: '1',
  });
  t.equal(run.code, 1);
  t.match(run.stderr, /benchmark FAILED/);
  t.match(readFileSync(join(out, 'results.md'), 'utf8'), '| get-4k-c64 | **FAILED** |');
});

t.test('the default --out is ./lightwell-bench, in a Lightwell checkout too', async (t) => {
  t.equal(defaultOutDir(repo), join(repo, 'lightwell-bench'), 'never the committed results');
  const other = tempDir();
  t.equal(defaultOutDir(other), join(other, 'lightwell-bench'));
  writeFileSync(join(other, 'package.json'), '{"name":"someone-else"}');
  t.equal(defaultOutDir(other), join(other, 'lightwell-bench'));
  writeFileSync(join(other, 'package.json'), 'not json');
  t.equal(defaultOutDir(other), join(other, 'lightwell-bench'));
});
