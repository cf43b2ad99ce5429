// Goal: a tenant's backup and its restore from the console's Backups page in a real browser. An
// owner backs up one tenant (previewed, then confirmed), the tenant is deleted, and the owner
// restores the backup into a new tenant: the plan counts the objects and the buckets it will
// make, the Restores table follows it to complete, and every object reads back byte-exact
// through the new tenant's key. No script error or CSP violation; screenshot for docs/console.md.
// Method: `lightwell serve` on loopback with backup.directory set, Chromium through
// puppeteer-core (browserTest), the admin and data APIs for the set-up and the read-back.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { browserTest, fill, go, newPage, press, screenshot, signIn, waitText } from './browser.js';
import { sha } from './backup-kit.js';

const scratch = mkdtempSync(join(tmpdir(), 'lw-tenant-backups-page-'));

browserTest(
  "a tenant's backup is made and restored into a new tenant from the Backups page",
  async (t, { service, browser, errors }) => {
    t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
    const owner = service.adminToken('owner', ['--name', 'ops-owner']);
    const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
    await service.tenant('globex', 'read,write,delete,admin', owner);
    t.equal((await acme.request('POST', '/buckets', { json: { name: 'vault' } })).status, 201);
    const objects = new Map<string, string>();
    for (const [key, body] of [
      ['small', Buffer.from('kept in the tenant backup')],
      ['large', randomBytes(2 * 1024 * 1024 + 5)],
      ['dir/nested', randomBytes(30_000)],
    ] as const) {
      t.equal((await acme.put('vault', key, body)).status, 200, `${key} written`);
      objects.set(key, sha(body));
    }

    const page = await newPage(browser, errors);
    await signIn(page, service, owner);
    await go(page, '#/backups', 'Start a backup');
    await fill(page, 'Backup name', 'acme-nightly');
    await fill(page, 'Tenant (optional)', 'acme');
    await press(page, 'Preview: start backup');
    await waitText(page, 'Plan for');
    await press(page, 'Confirm: start backup');
    await waitText(page, 'Backup acme-nightly queued.');
    await waitText(page, '1 tenants, 1 buckets, 3 versions');

    const reason = { reason: 'moved to a new tenant' };
    t.equal((await service.admin('POST', '/tenants/acme/disable', owner, reason)).status, 200);
    const gone = await service.admin('POST', '/tenants/acme/delete', owner, {
      ...reason,
      confirm: 'acme',
    });
    t.equal(gone.status, 200, 'acme is deleted');
    const phoenix = await service.tenant('phoenix', 'read,write,delete,admin', owner);

    await go(page, '#/backups', 'Restore a tenant');
    await fill(page, 'Into tenant', 'phoenix');
    await press(page, 'Preview: restore backup');
    await waitText(page, 'Buckets to create');
    await press(page, 'Confirm: restore backup');
    await waitText(page, 'Restore of acme-nightly into phoenix queued.');
    await waitText(page, '3 of 3 (0)');
    await screenshot(page, 'backups-tenant-restore');
    for (const [key, digest] of objects) {
      const answer = await phoenix.get('vault', key);
      t.equal(answer.status, 200, `${key} reads from phoenix`);
      t.equal(sha(answer.bytes), digest, `${key} is byte-exact`);
    }
    t.same(errors, [], 'no script error or CSP violation');
  },
  { env: { LIGHTWELL_BACKUP_DIRECTORY: join(scratch, 'backups') } },
);
