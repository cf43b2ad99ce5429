// Goal: the console's Encryption keys page rotates keys in a real browser, on the admin gates.
// An owner previews and confirms a tenant data-key rotation (the generation goes to 2), then a
// master-key rotation (the plan counts what is re-sealed; the fingerprint shown changes to the
// new key file's); every object written before and after both reads back byte-exact once the
// data client logs in again. A viewer sees the key state and no control; a tenant-scoped
// operator sees only its tenant, may rotate its data key and not the master key. No script
// error or CSP violation. The data-key rotation's background re-encryption is shown and runs to
// its end, dropping the retired key, with every object still readable. The overview's live
// charts, read from /metrics, are drawn.
// Screenshots for docs/console.md are taken on the way.
// Method: `lightwell serve` on loopback, Debian's Chromium through puppeteer-core.
import type { Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DataClient } from '../helpers/service.js';
import { masterKeyCheckOf } from '../../src/engine/master-key-check.js';
import {
  browserTest,
  newPage,
  screenshot,
  buttonTexts,
  waitText,
  textOf,
  fill,
  press,
  go,
  signIn,
} from './browser.js';

// A browser global, used inside page.evaluate callbacks (tests compile without the DOM library).
declare const document: { body: { innerText: string } };

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** A data-plane call, retried while a listener still loads a new master key (503). */
async function settled<T>(request: () => Promise<T>, status: (value: T) => number): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const answer = await request().catch((error: unknown) => error as T);
    if (status(answer) !== 503 || attempt === 200) return answer;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function readAll(t: Test, client: DataClient, objects: Map<string, string>) {
  for (const [key, digest] of objects) {
    const answer = await settled(
      () => client.get('vault', key),
      (value) => value.status,
    );
    t.equal(answer.status, 200, `${key} reads`);
    t.equal(sha(answer.bytes), digest, `${key} is byte-exact`);
  }
}

browserTest(
  'keys are rotated from the Encryption keys page',
  async (t, { service, browser, errors }) => {
    const owner = service.adminToken('owner', ['--name', 'ops-owner']);
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    await service.tenant('globex', 'read,write,delete,admin', owner);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'vault' } })).status, 201);
    const objects = new Map<string, string>();
    const write = async (key: string, body: Buffer): Promise<void> => {
      const answer = await settled(
        () => data.put('vault', key, body),
        (value) => value.status,
      );
      t.equal(answer.status, 200, `${key} written`);
      objects.set(key, sha(body));
    };
    await write('before/small', Buffer.from('sealed before any rotation'));
    await write('before/large', randomBytes(2 * 1024 * 1024));
    const keyFile = join(service.dataDir, 'keys', 'master.key');
    const fingerprint = (): string =>
      masterKeyCheckOf(readFileSync(keyFile)).subarray(0, 8).toString('hex');

    const page = await newPage(browser, errors);
    await signIn(page, service, owner);
    await go(page, '#/encryption', 'Tenant data keys');
    await waitText(page, fingerprint());
    t.equal(await textOf(page, '[aria-label="Master key fingerprint"]'), fingerprint());

    // Tenant data key: preview, then confirm.
    await page.locator('tr ::-p-text(acme)').wait();
    const rows = await page.$$('tbody tr');
    for (const row of rows) {
      const text = await row.evaluate((node: { textContent: string | null }) => node.textContent);
      if (text?.startsWith('acme') === true) await (await row.$('button'))?.click();
    }
    await press(page, 'Preview: rotate data key of acme');
    await waitText(page, 'Plan for rotateConsoleTenantDataKey');
    await screenshot(page, 'encryption-data-key-plan');
    await press(page, 'Confirm: rotate data key of acme');
    await waitText(page, 'Tenant acme now writes under key 2.');
    await write('after-data-key/small', Buffer.from('sealed under the second data key'));
    await write('after-data-key/large', randomBytes(2 * 1024 * 1024));
    await readAll(t, data, objects);
    // The rotation's re-encryption is shown, and runs to its end: the retired key is dropped.
    await waitText(page, 'Re-encryption of acme');
    await screenshot(page, 'encryption-reencryption');
    await waitText(page, 'Retired keys dropped');
    t.match(
      await textOf(page, '[aria-label="Re-encryption of acme"]'),
      /Retired keys kept\s*0[\s\S]*Retired keys dropped\s*1/,
      'the pass ended with the retired key dropped',
    );
    await readAll(t, data, objects);

    // Master key: preview (the plan counts what is re-sealed), then confirm.
    const before = fingerprint();
    await fill(page, 'Reason (optional)', 'yearly rotation');
    await press(page, 'Preview: rotate master key');
    await waitText(page, 'Tenant data keys to re-seal');
    await screenshot(page, 'encryption-master-key-plan');
    t.equal(fingerprint(), before, 'the preview changed no key');
    await press(page, 'Confirm: rotate master key');
    await waitText(page, 'Master key rotated');
    t.not(fingerprint(), before, 'the key file holds a new key');
    await waitText(page, fingerprint());
    await screenshot(page, 'encryption');
    await settled(
      () => data.login().then(() => 200),
      (value) => (typeof value === 'number' ? value : /login: 503/.test(String(value)) ? 503 : 0),
    );
    await write('after-master-key', Buffer.from('written under the new master key'));
    await readAll(t, data, objects);

    // A viewer sees the state and no control; a scoped operator only its tenant's control.
    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    await go(viewer, '#/encryption', 'Tenant data keys');
    t.same(
      (await buttonTexts(viewer)).filter((text) => text !== 'Sign out' && text !== 'Re-encryption'),
      [],
      'a viewer sees no mutating control',
    );
    const scoped = await newPage(browser, errors);
    await signIn(scoped, service, service.adminToken('operator', ['--tenant', 'acme']));
    await go(scoped, '#/encryption', 'Tenant data keys');
    // The heading comes before the keys' table: wait for the tenant's row and its control.
    await waitText(scoped, 'Rotate…');
    const body = await scoped.evaluate(() => document.body.innerText);
    t.notOk(body.includes('globex'), 'a scoped token sees only its tenant');
    const scopedButtons = await buttonTexts(scoped);
    t.notOk(
      scopedButtons.some((text) => text.includes('master key')),
      'no master-key control for a scoped token',
    );
    t.ok(scopedButtons.includes('Rotate…'), 'its own data key may be rotated');
    // The overview's live charts read /metrics (three reads make the first two rates).
    await page.bringToFront();
    await go(page, '#/', 'Live, from /metrics');
    await waitText(page, '2xx/3xx');
    t.ok(await page.$('[aria-label="Requests a second by status, from /metrics"]'), 'a chart');
    t.ok(await page.$('[aria-label="KiB a second received and sent, from /metrics"]'));
    await screenshot(page, 'overview-metrics');
    t.same(errors, [], 'no script error or CSP violation');
  },
);
