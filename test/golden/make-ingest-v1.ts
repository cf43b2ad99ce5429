// Writes the golden files of ingest protocol version 1 (test/golden/ingest-v1/) from
// test/ingest/frame-fixtures.ts. Run once when the version was defined; never again: the files
// pin the bytes of version 1 (node dist/test/golden/make-ingest-v1.js).
//
// This module is a helper, not a test; tap lists it as "no tests found".

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './golden-dir.js';
import { goldenFrames } from '../ingest/frame-fixtures.js';

if (process.argv.includes('--write')) {
  const directory = join(repoRoot(), 'test', 'golden', 'ingest-v1');
  mkdirSync(directory, { recursive: true });
  for (const [name, bytes] of Object.entries(goldenFrames))
    writeFileSync(join(directory, `${name}.bin`), bytes);
}
