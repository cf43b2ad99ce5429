// Goal: the console's Backups page in a real browser, on the admin gates. An owner previews a
// backup (the plan counts the segments), confirms it and sees it complete with what it holds;
// the backup restored with `lightwell restore` into an empty directory serves every object
// byte-exact. A viewer sees the list and no control; a tenant-scoped token has no Backups page
// in its menu. An owner adds an S3 target whose secret is then nowhere in the page. No script
// error or CSP violation. The page's screenshot is taken for
// docs/console.md.
// Method: `lightwell serve` on loopback with backup.directory set, Debian's Chromium through
// puppeteer-core, the CLI as a child process, a second service on the restored directory.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, DataClient, Service } from '../helpers/service.js';
import {
  chromiumPath,
  launch,
  newPage,
  screenshot,
  buttonTexts,
  waitText,
  fill,
  press,
  go,
  signIn,
  SHOTS_DIR,
  UPDATE_SHOTS,
} from './browser.js';

// A browser global, used inside page.evaluate callbacks (tests compile without the DOM library).
declare const document: { body: { innerText: string } };

const chromium = chromiumPath();
if ('skip' in chromium) t.plan(0, chromium.skip);
else run(chromium.path);

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

function run(path: string): void {
  t.test('a backup is made from the Backups page and restored', async (t) => {
    const scratch = mkdtempSync(join(tmpdir(), 'lw-backups-page-'));
    const service = await Service.start({
      env: { LIGHTWELL_BACKUP_DIRECTORY: join(scratch, 'backups') },
    });
    const browser = await launch(path);
    const started: Service[] = [];
    t.teardown(async () => {
      await browser.close();
      for (const other of started) await other.close();
      await service.close();
      rmSync(scratch, { recursive: true, force: true });
      if (!UPDATE_SHOTS) rmSync(SHOTS_DIR, { recursive: true, force: true });
    });
    const errors: string[] = [];
    const owner = service.adminToken('owner', ['--name', 'ops-owner']);
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'vault' } })).status, 201);
    const objects = new Map<string, string>();
    for (const [key, body] of [
      ['small', Buffer.from('kept in the backup')],
      ['large', randomBytes(2 * 1024 * 1024)],
    ] as const) {
      t.equal((await data.put('vault', key, body)).status, 200, `${key} written`);
      objects.set(key, sha(body));
    }

    const page = await newPage(browser, errors);
    await signIn(page, service, owner);
    await go(page, '#/backups', 'Start a backup');
    await fill(page, 'Backup name', 'nightly');
    await fill(page, 'Reason (optional)', 'before the upgrade');
    await press(page, 'Preview: start backup');
    await waitText(page, 'Segments to copy or link');
    await press(page, 'Confirm: start backup');
    await waitText(page, 'Backup nightly queued.');
    await waitText(page, '1 tenants, 1 buckets');
    // An S3 target: its secret is sent once and is nowhere in the page afterwards.
    const secret = 'never-shown-again-0123';
    await fill(page, 'Target name', 'offsite');
    await fill(page, 'Endpoint', 'https://s3.example.com');
    await fill(page, 'Bucket', 'lightwell-backups');
    await fill(page, 'Prefix (optional)', 'nightly/');
    await fill(page, 'Access key id', 'AKIAEXAMPLE');
    await fill(page, 'Secret access key', secret);
    await press(page, 'Preview: add target');
    await waitText(page, 'addConsoleBackupTarget');
    await press(page, 'Confirm: add target');
    await waitText(page, 'Target offsite added.');
    await waitText(page, 'lightwell-backups/nightly/');
    t.notOk((await page.content()).includes(secret), 'the page holds no secret');
    const typed = await page.$$eval('input', (inputs) =>
      inputs.map((input) => (input as unknown as { value: string }).value),
    );
    t.notOk(typed.includes(secret), 'no field holds the secret');
    await screenshot(page, 'backups');

    const target = join(scratch, 'restored');
    const restore = spawnSync(
      process.execPath,
      [CLI, 'restore', '--from', join(scratch, 'backups', 'nightly'), '--data-dir', target],
      { encoding: 'utf8' },
    );
    t.equal(restore.status, 0, `restore: ${restore.stdout}${restore.stderr}`);
    const restored = await Service.start({ dataDir: target });
    started.push(restored);
    const client = new DataClient(restored.publicUrl, data.accessKeyId, data.secretKey);
    await client.login();
    for (const [key, digest] of objects) {
      const answer = await client.get('vault', key);
      t.equal(answer.status, 200, `restored ${key} reads`);
      t.equal(sha(answer.bytes), digest, `restored ${key} is byte-exact`);
    }

    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    await go(viewer, '#/backups', 'Restore');
    await waitText(viewer, 'nightly');
    t.same(
      (await buttonTexts(viewer)).filter((text) => text !== 'Sign out'),
      [],
      'a viewer sees no control',
    );
    const scoped = await newPage(browser, errors);
    await signIn(scoped, service, service.adminToken('owner', ['--tenant', 'acme']));
    await go(scoped, '#/', 'Overview');
    const menu = await scoped.evaluate(() => document.body.innerText);
    t.notOk(menu.includes('Backups'), 'a tenant-scoped token has no Backups page');
    t.same(errors, [], 'no script error or CSP violation');
  });
}
