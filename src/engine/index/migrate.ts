// Decode-then-migrate for index values (docs/on-disk-format.md, "Index value"): every value
// carries the schema version of its record family; a reader decodes it, refuses a version newer
// than it knows (`format_too_new`, never a guess), and runs an older one through the family's
// migration chain, one step per version, up to the current version. Values are written only at
// the current version, so a record is migrated on disk when it is next written.
//
// Invariants:
// - `CURRENT_VERSIONS[db]` is the version every write uses; the chain of `db` has exactly
//   `CURRENT_VERSIONS[db] - 1` steps (asserted at load), step i taking version i + 1 to i + 2.
// - A migration is pure (value in, value out) and never fails on a value its version allows.
// - No version is ever skipped or thrown away: the version read decides the steps run.

import assert from 'node:assert/strict';
import { decodeValue, VALUE_SCHEMA_VERSION } from '../../format/values.js';
import { FormatTooNew } from '../../util/errors.js';
import { DB, type DbName } from './schema.js';

export type Migration = (value: Record<string, unknown>) => Record<string, unknown>;

/**
 * The schema version each record family is written at. Every family is at its first version;
 * a family that changes shape bumps its entry and appends its step to MIGRATIONS.
 */
export const CURRENT_VERSIONS: Readonly<Record<DbName, number>> = Object.fromEntries(
  Object.values(DB).map((db) => [db, VALUE_SCHEMA_VERSION]),
) as Record<DbName, number>;

/** The migration chains, by family: step i takes version i + 1 to version i + 2. */
export const MIGRATIONS: Readonly<Record<DbName, readonly Migration[]>> = Object.fromEntries(
  Object.values(DB).map((db) => [db, []]),
) as unknown as Record<DbName, readonly Migration[]>;

for (const db of Object.values(DB)) {
  assert.equal(
    MIGRATIONS[db].length,
    CURRENT_VERSIONS[db] - 1,
    `the migration chain of ${db} must reach its current version`,
  );
}

/**
 * Decodes a stored value of family `db` and brings it to the current version (`current` and
 * `chain` are the family's, and given only by tests).
 */
export function decodeRecord(
  db: DbName,
  raw: Buffer,
  current = CURRENT_VERSIONS[db],
  chain = MIGRATIONS[db],
): Record<string, unknown> {
  const { schemaVersion, value } = decodeValue(raw);
  if (schemaVersion === current) return value;
  if (schemaVersion > current)
    throw FormatTooNew(
      `an index value of ${db} has schema version ${schemaVersion}, newer than this release ` +
        `reads (${current}): a newer Lightwell wrote it`,
      { db, schemaVersion, current },
    );
  let migrated = value;
  for (let version = schemaVersion; version < current; version += 1) {
    const step = chain[version - 1];
    assert.ok(step, `no migration of ${db} from version ${version}`);
    migrated = step(migrated);
  }
  return migrated;
}
