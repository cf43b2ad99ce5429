// Goal: docs/ingest-protocol.md stays the authority on the ingest frames: its byte tables, frame
// type codes, checksum codes and close codes agree with the constants of src/ingest/frames.ts.
// Method: parse each table that follows `<!-- frame: NAME -->`, derive the constant names from
// the field names (`windowBytes` → WELCOME_OFFSET_WINDOW_BYTES) and compare offsets; check that
// each type's width is its size, that the rows tile the fixed part from 0 up to NAME_FIXED_BYTES,
// and that the codec exports no NAME_OFFSET_ constant the table lacks. Then compare the
// frame-type, checksum-code and close-code tables with FRAME_*, CHECKSUM_CODES and CLOSE_*.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import * as frames from '../../src/ingest/frames.js';
import { repoRoot } from '../golden/golden-dir.js';

const markdown = readFileSync(join(repoRoot(), 'docs', 'ingest-protocol.md'), 'utf8');
const lines = markdown.split('\n');
const constants = frames as unknown as Record<string, unknown>;
const WIDTHS: Record<string, number> = { u8: 1, u16: 2, u32: 4, u64: 8 };

/** The rows of the table that follows the marker line `marker` (header and rule skipped). */
function tableAfter(marker: string): string[][] {
  const index = lines.findIndex((line) => line.trim() === marker);
  assert.ok(index >= 0, `the document has ${marker}`);
  const rows: string[][] = [];
  for (let i = index + 3; i < lines.length && (lines[i] ?? '').trim().startsWith('|'); i++)
    rows.push(
      (lines[i] ?? '')
        .trim()
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  assert.ok(rows.length > 0, `${marker} has rows`);
  return rows;
}

const snake = (field: string): string => field.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();

const FRAMES = ['HELLO', 'WELCOME', 'OBJECT', 'DATA', 'TOKEN', 'ACK', 'CREDIT'];

t.test('frame layouts match the codec', async (t) => {
  for (const name of FRAMES) {
    let end = 0;
    const named = new Set<string>();
    for (const [offset = '', size = '', type = '', field = ''] of tableAfter(
      `<!-- frame: ${name} -->`,
    )) {
      const constant = `${name}_OFFSET_${snake(field)}`;
      named.add(constant);
      t.equal(constants[constant], Number(offset), constant);
      t.equal(Number(offset), end, `${name}.${field} follows the previous field`);
      t.equal(WIDTHS[type], Number(size), `${name}.${field}: ${type} is ${size} bytes`);
      end = Number(offset) + Number(size);
    }
    t.equal(constants[`${name}_FIXED_BYTES`], end, `${name}_FIXED_BYTES`);
    const exported = Object.keys(constants).filter((key) => key.startsWith(`${name}_OFFSET_`));
    t.same(
      exported.filter((key) => !named.has(key)),
      [],
      `${name}: no offset outside the table`,
    );
  }
});

t.test('frame type codes match the codec', async (t) => {
  const rows = tableAfter('<!-- frame-types -->');
  t.same(rows.map(([, frame]) => frame).sort(), [...FRAMES].sort(), 'every frame, once');
  for (const [code = '', frame = ''] of rows)
    t.equal(constants[`FRAME_${frame}`], Number(code), `FRAME_${frame}`);
});

t.test('checksum codes match the codec', async (t) => {
  const rows = tableAfter('<!-- checksum-codes -->').map(([code, alg, bytes]) => [
    Number(code),
    alg,
    Number(bytes),
  ]);
  t.same(rows, frames.CHECKSUM_CODES);
});

t.test('close codes match the codec', async (t) => {
  const rows = tableAfter('<!-- close-codes -->');
  const documented = new Set<string>();
  for (const [code = '', name = ''] of rows) {
    documented.add(`CLOSE_${name}`);
    t.equal(constants[`CLOSE_${name}`], Number(code), `CLOSE_${name}`);
  }
  const exported = Object.keys(constants).filter((key) => key.startsWith('CLOSE_'));
  t.same(
    exported.filter((key) => !documented.has(key)),
    [],
    'no close code undocumented',
  );
});
