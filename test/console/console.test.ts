// Goal: the HTML admin console works end to end in a real browser, on the admin API's gates.
// An owner signs in, creates a tenant, an account and a key (the secret shown once and never
// again), rotates it (the old secret stops working) and revokes it after a dry-run plan; sets
// a quota and watches usage follow a data-plane write; edits a bucket policy (an invalid one
// answered with the API's message) and sees it enforced on the data plane; reads the audit log
// and the cluster page; disables and deletes a tenant, each after its dry-run plan. A viewer
// token sees no mutating control, and a tenant-scoped token sees only its tenant. No page hits
// a script error or a Content-Security-Policy violation. The screenshots of docs/console.md
// are taken on the way.
// Method: `lightwell serve` on loopback, Debian's Chromium through puppeteer-core.
import t from 'tap';
import type { Browser } from 'puppeteer-core';
import { Service, DataClient } from '../helpers/service.js';
import { rmSync } from 'node:fs';
import {
  chromiumPath,
  launch,
  newPage,
  screenshot,
  buttonTexts,
  waitText,
  textOf,
  fill,
  press,
  go,
  signIn,
  SHOTS_DIR,
  UPDATE_SHOTS,
} from './browser.js';
import { plantBadChunk } from './plant.js';

// A browser global, used inside page.evaluate callbacks (tests compile without the DOM library).
declare const document: { body: { innerText: string } };

const chromium = chromiumPath();
if ('skip' in chromium) {
  t.plan(0, chromium.skip);
} else {
  run(chromium.path);
}

async function loginStatus(service: Service, accessKeyId: string, secret: string) {
  try {
    await new DataClient(service.publicUrl, accessKeyId, secret).login();
    return 200;
  } catch (error) {
    return Number(/login: (\d+)/.exec(String(error))?.[1] ?? 0);
  }
}

function run(path: string): void {
  let service: Service;
  let browser: Browser;
  const errors: string[] = [];
  t.before(async () => {
    service = await Service.start();
    browser = await launch(path);
  });
  t.teardown(async () => {
    await browser.close();
    await service.close();
    if (!UPDATE_SHOTS) rmSync(SHOTS_DIR, { recursive: true, force: true });
  });

  t.test('an owner runs tenants, keys, quotas, policies and the audit log', async (t) => {
    const page = await newPage(browser, errors);
    const owner = service.adminToken('owner', ['--name', 'ops-owner']);
    const base = service.adminUrl.replace('/admin/api/v1', '');
    const served = await fetch(`${base}/admin/console/`);
    t.match(served.headers.get('content-security-policy'), /script-src 'self'; style-src 'self'/);
    t.equal(served.headers.get('set-cookie'), null, 'no cookie');

    await page.goto(`${base}/admin/console/`);
    await waitText(page, 'Sign in with an admin token');
    await fill(page, 'Admin token', 'lwadm_not-a-token');
    await press(page, 'Sign in');
    await waitText(page, 'invalid or revoked admin token');
    await screenshot(page, 'sign-in');
    await signIn(page, service, owner);

    await go(page, '#/tenants', 'Create a tenant');
    await fill(page, 'Tenant id', 'acme');
    await fill(page, 'Display name (optional)', 'Acme Corp');
    await press(page, 'Create tenant');
    await waitText(page, 'Acme Corp');
    await fill(page, 'Tenant id', 'acme');
    await press(page, 'Create tenant');
    await waitText(page, 'HTTP 409');

    // Account and key: the secret is shown once.
    await go(page, '#/tenants/acme/keys', 'Service accounts');
    await fill(page, 'Account id', 'ingest');
    await press(page, 'Create account');
    await waitText(page, 'New access key');
    await fill(page, 'Scopes', 'read,write');
    await press(page, 'Create key');
    await page.waitForSelector('[data-testid=secret-key]');
    const keyId = await textOf(page, '[data-testid=access-key-id]');
    const secret = await textOf(page, '[data-testid=secret-key]');
    t.ok(keyId && secret, 'the key and its secret are shown');
    await screenshot(page, 'key-created');
    t.equal(await loginStatus(service, keyId, secret), 200, 'the shown secret works');
    await press(page, 'I have stored it');
    await go(page, '#/tenants/acme/quota', 'Usage');
    await go(page, '#/tenants/acme/keys', keyId);
    t.notOk((await page.content()).includes(secret), 'the secret is never shown again');

    await press(page, `Rotate ${keyId}`);
    await press(page, 'Preview: rotate key');
    await page.waitForSelector('.plan');
    await press(page, 'Confirm: rotate key');
    await page.waitForSelector('[data-testid=secret-key]');
    const rotated = await textOf(page, '[data-testid=secret-key]');
    t.not(rotated, secret, 'rotation shows a new secret');
    t.equal(await loginStatus(service, keyId, secret), 401, 'the old secret stops working');
    t.equal(await loginStatus(service, keyId, rotated), 200, 'the new secret works');
    await press(page, 'I have stored it');

    await press(page, `Revoke ${keyId}`);
    t.ok(
      await page.$('::-p-aria(Preview: revoke key[role="button"])[disabled]'),
      'no preview without a reason',
    );
    await fill(page, 'Reason (for the audit log)', 'found in a build log');
    await press(page, 'Preview: revoke key');
    await page.waitForSelector('.plan');
    t.match(await textOf(page, '.plan'), /Access keys\s*1/, 'the plan counts one key');
    await screenshot(page, 'key-revoke-plan');
    // The confirm button takes the focus once the plan is shown: Enter confirms.
    await page.waitForSelector('button.danger:focus');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.badge-revoked');
    t.equal(await loginStatus(service, keyId, rotated), 401, 'a revoked key mints nothing');
    await screenshot(page, 'keys');

    // Quota, and usage following a write on the data plane.
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    await go(page, '#/tenants/acme/quota', 'Max bytes');
    await fill(page, 'Max bytes', '1 MiB');
    await fill(page, 'Max objects', '10');
    await press(page, 'Save quota');
    await waitText(page, 'of 1.00 MiB');
    t.equal((await data.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
    t.equal((await data.put('photos', 'cat.jpg', Buffer.alloc(300_000, 7))).status, 200);
    await waitText(page, 'Objects: 1 of 10');
    await waitText(page, '293.0 KiB');
    await screenshot(page, 'quota');

    // The bucket policy editor: an invalid policy is refused in the API's words; a saved one
    // is enforced on the data plane.
    await go(page, '#/tenants/acme/buckets', 'photos');
    await press(page, 'photos');
    await page.waitForSelector('textarea');
    const policy = (effect: string): string =>
      JSON.stringify(
        {
          version: 1,
          statements: [{ effect, actions: ['read'], principals: [data.accessKeyId] }],
        },
        null,
        2,
      );
    await page.locator('textarea').fill(policy('Allow'));
    await press(page, 'Validate');
    await waitText(page, 'statements[0].effect must be "Deny"');
    await page.locator('textarea').fill(policy('Deny'));
    await press(page, 'Validate');
    await waitText(page, 'Valid: nothing saved yet.');
    t.equal((await data.get('photos', 'cat.jpg')).status, 200, 'a dry run changes nothing');
    await press(page, 'Save policy');
    await waitText(page, 'Saved.');
    await waitText(page, '1 statements');
    t.equal((await data.get('photos', 'cat.jpg')).status, 403, 'the policy is enforced');
    await screenshot(page, 'buckets');

    // A scrub: previewed, started, watched; the planted bad chunk is reported with its object.
    // (Planted after the last write: the engine rewrites the open segment's partial last page.)
    t.equal((await data.put('photos', 'dog.jpg', Buffer.alloc(70_000, 9))).status, 200);
    const chunkId = await plantBadChunk(service.dataDir, 'acme', 'photos', 'cat.jpg');
    await go(page, '#/tenants/acme/scrub', 'Start a scrub');
    await press(page, 'Preview: start scrub');
    await page.waitForSelector('.plan');
    t.match(await textOf(page, '.plan'), /Versions\s*2/, 'the plan counts both objects');
    await press(page, 'Confirm: start scrub');
    await waitText(page, 'complete');
    await waitText(page, 'cat.jpg');
    const findings = await textOf(page, 'table[aria-label="Corrupt chunks"]');
    t.notMatch(findings, /dog\.jpg/, 'the intact object is not reported');
    const jobs = await fetch(`${base}/admin/console/api/scrubs?tenant=acme`, {
      headers: { Authorization: `Bearer ${owner}` },
    });
    t.match(await jobs.json(), {
      jobs: [{ state: 'complete', corrupt: [{ key: 'cat.jpg', chunkId }] }],
    });
    await screenshot(page, 'scrub');

    // Disable and delete, each after its plan.
    const created = await service.admin('POST', '/tenants', owner, { id: 'old-co' });
    t.equal(created.status, 201);
    await go(page, '#/tenants/old-co', 'Disable this tenant');
    await fill(page, 'Reason (for the audit log)', 'contract ended');
    await press(page, 'Preview: disable tenant');
    await page.waitForSelector('.plan');
    await screenshot(page, 'tenant-disable-plan');
    await press(page, 'Confirm: disable tenant');
    await waitText(page, 'Delete this tenant');
    await fill(page, 'Reason (for the audit log)', 'contract ended');
    await fill(page, 'Type the tenant id (old-co) to confirm', 'old-co');
    await press(page, 'Preview: delete tenant');
    await page.waitForSelector('.plan');
    await screenshot(page, 'tenant-delete-plan');
    await press(page, 'Confirm: delete tenant');
    await page.waitForSelector('h1 .badge-deleted');

    await go(page, '#/audit', 'Filters');
    await page.locator('::-p-aria(Tenant)').wait();
    await (await page.$('::-p-aria(Tenant)'))?.select('acme');
    await fill(page, 'Action contains', 'TenantKey');
    await waitText(page, 'revokeTenantKey');
    await waitText(page, 'found in a build log');
    await screenshot(page, 'audit');
    await go(page, '#/cluster', 'Consensus membership');
    await waitText(page, 'voter');
    await waitText(page, 'A single node: every bucket has one copy, on this node.');
    await page.waitForSelector('table[aria-label="Buckets per node"]');
    await screenshot(page, 'cluster');
    await go(page, '#/tenants', 'All tenants');
    await screenshot(page, 'tenants');
    await go(page, '#/', 'Requests a minute');
    await page.waitForSelector('.chart canvas');
    await waitText(page, 'Healthy');
    await screenshot(page, 'overview');
    t.same(errors, [], 'no script error or CSP violation');
    await page.close();
  });

  t.test('a viewer sees no mutating control; a scoped token sees only its tenant', async (t) => {
    const owner = service.adminToken('owner');
    t.equal((await service.admin('POST', '/tenants', owner, { id: 'globex' })).status, 201);
    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    const mutating =
      /create|rotate|revoke|save|remove|disable|delete|preview|confirm|validate|start|cancel/i;
    for (const [hash, heading] of [
      ['#/tenants', 'All tenants'],
      ['#/tenants/acme', 'Created'],
      ['#/tenants/acme/keys', 'Access keys'],
      ['#/tenants/acme/quota', 'Objects:'],
      ['#/tenants/acme/buckets', 'photos'],
      ['#/tenants/acme/scrub', 'cat.jpg'],
    ] as const) {
      await go(viewer, hash, heading);
      if (hash.endsWith('buckets')) {
        await press(viewer, 'photos');
        await waitText(viewer, 'Bucket policy');
        t.equal(await viewer.$('textarea'), null, 'no policy editor');
      }
      const pressable = (await buttonTexts(viewer)).filter((text) => mutating.test(text));
      t.same(pressable, [], `no mutating control on ${hash}`);
      t.equal(await viewer.$('form input'), null, `no form on ${hash}`);
    }
    await go(viewer, '#/tenants/acme/keys', 'Access keys');
    await screenshot(viewer, 'viewer-keys');
    await viewer.close();

    const scoped = await newPage(browser, errors);
    await signIn(scoped, service, service.adminToken('operator', ['--tenant', 'acme']));
    await go(scoped, '#/tenants', 'All tenants');
    await waitText(scoped, 'Acme Corp');
    t.notOk((await scoped.evaluate(() => document.body.innerText)).includes('globex'));
    t.notOk(
      (await buttonTexts(scoped)).includes('Create tenant'),
      'a scoped token creates no tenants',
    );
    await go(scoped, '#/tenants/globex', 'limited to tenant acme');
    await waitText(scoped, 'HTTP 403');
    await screenshot(scoped, 'scoped-forbidden');
    await go(scoped, '#/audit', 'Filters');
    const tenantSelect = await scoped.waitForSelector('::-p-aria(Tenant)');
    const options = await tenantSelect!.$$eval(
      'option',
      (nodes: Array<{ getAttribute(name: string): string | null }>) =>
        nodes.map((node) => node.getAttribute('value')),
    );
    t.notOk(options.includes(''), 'no "all tenants" choice');
    t.notOk(options.includes('globex'), 'no other tenant');
    t.same(errors, [], 'no script error or CSP violation');
    await scoped.close();
  });
}
