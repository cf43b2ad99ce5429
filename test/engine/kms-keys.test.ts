// Goal: the rules of a tenant's named KMS keys (engine/ops/kms-keys.ts): ids as AWS and test rigs
// write them, no id twice nor the tenant's own, at most 100 keys, a description without control
// characters, and `kms.new_tenant_keys` presets added once each, trimmed, skipping blanks.
// Method: the record functions on an in-memory tenant record.
import t from 'tap';
import {
  addKmsKey,
  addPresetKmsKeys,
  KMS_KEYS_PER_TENANT_MAX,
  validateKmsKeyId,
} from '../../src/engine/ops/kms-keys.js';
import type { TenantRecord } from '../../src/engine/index/schema.js';
import { isLightwellError } from '../../src/util/errors.js';

function tenant(): TenantRecord {
  return { id: 'acme', num: 1, state: 'active', createdAt: 0, wrappedKey: Buffer.alloc(0) };
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return isLightwellError(error) ? error.code : 'not lightwell';
  }
  return 'none';
}

t.test('key ids', async (t) => {
  for (const id of ['testkey-1', 'alias/backups', '1234abcd-12ab-34cd-56ef-1234567890ab', 'a'])
    t.equal(validateKmsKeyId(id), id);
  for (const id of ['', '-x', 'with space', 'a'.repeat(129), 'tab\t', 7])
    t.equal(
      codeOf(() => validateKmsKeyId(id)),
      'bad_request',
      JSON.stringify(id),
    );
});

t.test('adding keys', async (t) => {
  const record = tenant();
  t.same(addKmsKey(record, 'k1', 5, 'first'), { id: 'k1', createdAt: 5, description: 'first' });
  t.equal(
    codeOf(() => addKmsKey(record, 'k1', 6)),
    'conflict',
    'no id twice',
  );
  t.equal(
    codeOf(() => addKmsKey(record, 'acme', 6)),
    'conflict',
    "not the tenant's own id",
  );
  t.equal(
    codeOf(() => addKmsKey(record, 'k2', 6, 'line\nbreak')),
    'bad_request',
  );
  for (let index = 2; index <= KMS_KEYS_PER_TENANT_MAX; index += 1)
    addKmsKey(record, `k${index}`, index);
  t.equal(
    codeOf(() => addKmsKey(record, 'one-more', 0)),
    'conflict',
    'at most 100',
  );
  t.equal(record.kmsKeys?.length, KMS_KEYS_PER_TENANT_MAX);
});

t.test('presets of new tenants', async (t) => {
  const record = tenant();
  addPresetKmsKeys(record, ' testkey-1, testkey-2,,testkey-1 ', 9);
  t.same(
    record.kmsKeys?.map((key) => key.id),
    ['testkey-1', 'testkey-2'],
  );
  const none = tenant();
  addPresetKmsKeys(none, '', 9);
  t.equal(none.kmsKeys, undefined, 'no setting, no keys');
});
