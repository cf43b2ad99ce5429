// Generator of the format version 1 golden sealed values. It was run ONCE, when the key-wrapping
// scheme was first documented (docs/on-disk-format.md §3, "Keys derived from the master key").
//
// NEVER RUN IT AGAIN. test/golden/v1/sealed-secrets.json is data "written by release 1" and is
// read forever by test/format/golden-secrets-v1.test.ts: if current code cannot open it, current
// code is wrong, not the golden data. The script refuses to overwrite the file and only writes
// when given --write-once:
//
//   node dist/test/golden/make-secrets-v1.js --write-once
//
// It writes, under a fixed public master key (bytes 7·i + 1 mod 256, i = 0..31): a tenant's data
// key wrapped as `tenants.wrappedKey` is, an access-key secret and a webhook signing secret
// sealed as the index stores them. Nonces are random: the values are kept, not re-derived.
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  deriveKey,
  PURPOSE_SECRET_SEAL,
  sealSecret,
  wrapTenantKey,
} from '../../src/security/keys.js';
import { goldenDir } from './golden-dir.js';

export const GOLDEN_MASTER_KEY = Buffer.from([...Array(32).keys()].map((i) => (7 * i + 1) & 0xff));
export const GOLDEN_DATA_KEY = Buffer.from([...Array(32).keys()].map((i) => (0xa0 + i) & 0xff));
export const GOLDEN_TENANT = 'golden-tenant';
export const GOLDEN_ACCESS_KEY = 'LWAKGOLDEN000000';
export const GOLDEN_ACCESS_SECRET = 'lwsk_golden_not_a_secret_0123456789';
export const GOLDEN_WEBHOOK = { tenantId: GOLDEN_TENANT, bucketId: 7, configId: 'hook-1' };
export const GOLDEN_WEBHOOK_SECRET = 'whsec_golden_not_a_secret';

if (process.argv.includes('--write-once')) {
  const file = join(goldenDir(1), 'sealed-secrets.json');
  if (existsSync(file)) throw new Error(`${file} exists: golden data is never regenerated`);
  const seal = deriveKey(GOLDEN_MASTER_KEY, PURPOSE_SECRET_SEAL);
  const { tenantId, bucketId, configId } = GOLDEN_WEBHOOK;
  const golden = {
    tenantWrappedKey: wrapTenantKey(GOLDEN_MASTER_KEY, GOLDEN_TENANT, GOLDEN_DATA_KEY),
    accessKeySealedSecret: sealSecret(
      seal,
      Buffer.from(GOLDEN_ACCESS_SECRET),
      `access-key:${GOLDEN_ACCESS_KEY}`,
    ),
    webhookSealedSecret: sealSecret(
      seal,
      Buffer.from(GOLDEN_WEBHOOK_SECRET),
      `webhook:${tenantId}:${bucketId}:${configId}`,
    ),
  };
  const hex = Object.fromEntries(
    Object.entries(golden).map(([name, bytes]) => [name, bytes.toString('hex')]),
  );
  writeFileSync(file, `${JSON.stringify(hex, null, 2)}\n`, { flag: 'wx' });
}
