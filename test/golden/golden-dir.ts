// Finds golden data in the source tree, from a test compiled anywhere.
//
// Golden files are committed under test/golden/v<N>/ and are never copied by tsc, so a test
// running from dist/test/format/ (or any other output directory) must find the source tree:
// the nearest ancestor, first of this module and then of the working directory, that holds
// the project's package.json. tap runs tests with the project root as working directory.
//
// This module is a helper, not a test; tap lists it as "no tests found".

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_NAME = 'lightwell';

/** The directory that holds the project's package.json. */
export function repoRoot(): string {
  const root = findRoot(dirname(fileURLToPath(import.meta.url))) ?? findRoot(process.cwd());
  assert.ok(root !== undefined, 'cannot find the lightwell source tree');
  return root;
}

/** The committed golden data of format version `version`. */
export function goldenDir(version: number): string {
  return join(repoRoot(), 'test', 'golden', `v${version}`);
}

function findRoot(start: string): string | undefined {
  let directory = start;
  for (;;) {
    const manifest = join(directory, 'package.json');
    if (existsSync(manifest) && readName(manifest) === PROJECT_NAME) return directory;
    const parent = dirname(directory);
    if (parent === directory) return undefined;
    directory = parent;
  }
}

function readName(manifest: string): unknown {
  const parsed: unknown = JSON.parse(readFileSync(manifest, 'utf8'));
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  return (parsed as { name?: unknown }).name;
}
