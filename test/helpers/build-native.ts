// scripts/build-native.mjs run from tests: into a temp directory (`--out` for the library,
// `--loadgen-out` for the benchmark's load generator), and the checks that every native build
// shares: without a compiler it warns and succeeds, and fails only when
// LIGHTWELL_NATIVE_REQUIRED=1 says the native code is required.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';

const buildScript = join(import.meta.dirname, '../../../scripts/build-native.mjs');

export type BuildFlag = '--out' | '--loadgen-out';

/** Whether the machine has a C compiler ($CC, else cc). */
export function compilerAvailable(): boolean {
  const result = spawnSync(process.env['CC'] ?? 'cc', ['--version'], { stdio: 'ignore' });
  return result.status === 0;
}

/** Runs the build script for one output, with `env` added to this process's environment. */
export function runBuild(
  flag: BuildFlag,
  out: string,
  env: Record<string, string>,
): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [buildScript, flag, out], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
}

/**
 * Checks the build without a compiler (a warning matching `warning`, exit 0, nothing built;
 * exit 1 when required), then builds into a temp directory where a compiler exists: answers
 * the built file's path, or null without a compiler. The directory goes with the test.
 */
export function checkBuild(t: Test, flag: BuildFlag, warning: RegExp): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'lw-native-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const noCompiler = { CC: join(dir, 'no-such-cc') };
  const missing = runBuild(flag, join(dir, 'a'), noCompiler);
  t.equal(missing.status, 0, 'no compiler: the build still succeeds');
  t.match(missing.stderr, warning);
  t.notOk(existsSync(join(dir, 'a')));
  const required = runBuild(flag, join(dir, 'b'), {
    ...noCompiler,
    LIGHTWELL_NATIVE_REQUIRED: '1',
  });
  t.equal(required.status, 1, 'no compiler, but required: the build fails');
  if (!compilerAvailable()) return null;
  const built = runBuild(flag, join(dir, 'c'), {});
  t.equal(built.status, 0, built.stderr);
  return join(dir, 'c');
}
