// Goal: the byte tables of docs/on-disk-format.md and the OFFSET_* / SIZE_* constants of
// src/format/ agree, so the document stays the authority on the layout.
// Method: parse every table that follows a `<!-- layout: <module> <PREFIX> <SIZE_CONSTANT> -->`
// comment. For each row, derive the constant names from the field name (`plainLength` →
// OFFSET_RECORD_PLAIN_LENGTH) and compare offset and size. Check that the rows tile the
// structure from 0 without gaps or overlap up to the size constant, that each type agrees with
// its size, and that the module exports no OFFSET_/SIZE_ constant of that prefix that the table
// lacks.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import * as marker from '../../src/format/marker.js';
import * as recordFrame from '../../src/format/record-frame.js';
import * as sealFooter from '../../src/format/seal-footer.js';
import * as segmentHeader from '../../src/format/segment-header.js';
import * as values from '../../src/format/values.js';
import { repoRoot } from '../golden/golden-dir.js';

const modules: Record<string, Record<string, unknown>> = {
  marker,
  'segment-header': segmentHeader,
  'record-frame': recordFrame,
  'seal-footer': sealFooter,
  values,
};

const TABLE_HEADER = '| offset | size | type | field | valid values |';

interface Row {
  readonly offset: number;
  readonly size: number | '*';
  readonly type: string;
  readonly field: string;
}

interface Layout {
  readonly module: string;
  readonly prefix: string;
  readonly sizeConstant: string;
  readonly rows: Row[];
}

function parseLayouts(markdown: string): Layout[] {
  const lines = markdown.split('\n');
  const layouts: Layout[] = [];
  lines.forEach((line, index) => {
    const match = /^<!-- layout: (\S+) (\S+) (\S+) -->$/.exec(line);
    if (match === null) return;
    const [, module = '', prefix = '', sizeConstant = ''] = match;
    assert.equal(lines[index + 1], TABLE_HEADER, `layout ${module}: table header`);
    const rows: Row[] = [];
    for (let i = index + 3; i < lines.length && (lines[i] ?? '').startsWith('|'); i++) {
      const cells = (lines[i] ?? '')
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim());
      const [offset = '', size = '', type = '', field = ''] = cells;
      rows.push({
        offset: Number(offset),
        size: size === '*' ? '*' : Number(size),
        type,
        field: field.replaceAll('`', ''),
      });
    }
    layouts.push({ module, prefix, sizeConstant, rows });
  });
  return layouts;
}

function constantSuffix(field: string): string {
  return field.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
}

function typeSize(type: string): number | '*' | undefined {
  const fixed: Record<string, number> = { u8: 1, u16: 2, u32: 4, u64: 8 };
  if (type in fixed) return fixed[type];
  const array = /^(?:bytes|ascii)\[(\d+)\]$/.exec(type);
  if (array !== null) return Number(array[1]);
  if (type === 'msgpack') return '*';
  return undefined;
}

const markdown = readFileSync(join(repoRoot(), 'docs', 'on-disk-format.md'), 'utf8');
const layouts = parseLayouts(markdown);

t.same(
  layouts.map((layout) => layout.module).sort(),
  Object.keys(modules).sort(),
  'every format module has exactly one byte table',
);

for (const layout of layouts) {
  t.test(`${layout.module}: table matches constants`, async (t) => {
    const exports = modules[layout.module];
    assert.ok(exports !== undefined, `unknown module ${layout.module}`);
    t.ok(layout.rows.length > 0, 'table has rows');
    let expectedOffset = 0;
    const documented = new Set<string>();
    for (const row of layout.rows) {
      const suffix = `${layout.prefix}_${constantSuffix(row.field)}`;
      documented.add(`OFFSET_${suffix}`);
      t.equal(row.offset, expectedOffset, `${row.field} starts where the previous field ends`);
      t.equal(exports[`OFFSET_${suffix}`], row.offset, `OFFSET_${suffix}`);
      t.equal(typeSize(row.type), row.size, `${row.field}: type ${row.type} has its size`);
      if (row.size === '*') {
        t.equal(row, layout.rows.at(-1), `${row.field}: only the last field is variable`);
        t.equal(exports[`SIZE_${suffix}`], undefined, `no SIZE_${suffix} for a variable field`);
        continue;
      }
      documented.add(`SIZE_${suffix}`);
      t.equal(exports[`SIZE_${suffix}`], row.size, `SIZE_${suffix}`);
      expectedOffset += row.size;
    }
    if (layout.sizeConstant !== '-') {
      const message = `fields add up to ${layout.sizeConstant}`;
      t.equal(exports[layout.sizeConstant], expectedOffset, message);
    }
    const exported = Object.keys(exports).filter(
      (name) =>
        name.startsWith(`OFFSET_${layout.prefix}_`) || name.startsWith(`SIZE_${layout.prefix}_`),
    );
    t.same(exported.sort(), [...documented].sort(), 'no undocumented OFFSET_/SIZE_ constants');
  });
}
