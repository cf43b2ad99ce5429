// Goal: a tenant's Lifecycle tab in a real browser. An operator of the tenant adds a rule with
// the short form (prefix tmp/, expire after 1 day), previews it and sees the dry run list exactly
// the objects the rule would expire now; confirms, sees the rule in the bucket's rules, and the
// S3 API answers the same rule. A viewer sees the rules
// and no control. No script error or CSP violation. Screenshots for docs/console.md.
// Method: `lightwell serve` on loopback with a one-second lifecycle day (`lifecycle.day`, as in
// test/s3/sdk-lifecycle.test.ts), Debian's Chromium through puppeteer-core, S3 through the SDK.
import { setTimeout as delay } from 'node:timers/promises';
import { GetBucketLifecycleConfigurationCommand } from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import {
  browserTest,
  newPage,
  screenshot,
  buttonTexts,
  waitText,
  fill,
  press,
  go,
  signIn,
  textOf,
} from './browser.js';

const DAY_MS = 1000;

browserTest(
  "a bucket's lifecycle rules from the tenant's Lifecycle tab",
  async (t, { service, browser, errors }) => {
    const owner = service.adminToken('owner');
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'logs' } })).status, 201);
    for (const key of ['tmp/build-1.log', 'tmp/build-2.log', 'reports/2026-q4.pdf'])
      t.equal((await data.put('logs', key, `contents of ${key}`)).status, 200);
    // A rule of one day acts at the first day boundary after write time plus a day.
    const dueBy = Date.now() + 2 * DAY_MS;

    const page = await newPage(browser, errors);
    await signIn(page, service, service.adminToken('operator', ['--tenant', 'acme']));
    await go(page, '#/tenants/acme/lifecycle', 'Lifecycle rules of logs');
    await waitText(page, 'No lifecycle rules');
    await fill(page, 'Rule id', 'drop-tmp');
    await fill(page, 'Key prefix', 'tmp/');
    await fill(page, 'Expire current versions after (days)', '1');
    await press(page, 'Add rule to the draft');
    await page.waitForFunction(
      "document.querySelector('#lifecycle-rules')?.value.includes('\"drop-tmp\"')",
      { timeout: 20_000 },
    );
    await delay(Math.max(0, dueBy - Date.now()));
    await press(page, 'Preview: save lifecycle rules');
    await waitText(page, 'Plan for putConsoleBucketLifecycle');
    const due = await textOf(page, 'table[aria-label="Due now"] tbody');
    t.match(due, /tmp\/build-1\.log.*expire the current version.*drop-tmp/s);
    t.match(due, /tmp\/build-2\.log/);
    t.notMatch(due, /reports/, 'the dry run lists only what the rule covers');
    await screenshot(page, 'lifecycle-plan');
    await press(page, 'Confirm: save lifecycle rules');
    await waitText(page, 'Lifecycle rules saved.');
    await waitText(page, 'expire after 1 day');
    t.match(
      await textOf(page, 'table[aria-label="Lifecycle rules"]'),
      /drop-tmpEnabledprefix tmp\//,
    );
    await screenshot(page, 'lifecycle');

    const s3 = s3ClientFor(service.publicUrl.replace(/\/api\/v1$/, ''), data);
    t.teardown(() => s3.destroy());
    const got = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'logs' }));
    t.match(got.Rules, [{ ID: 'drop-tmp', Status: 'Enabled', Expiration: { Days: 1 } }]);

    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    await go(viewer, '#/tenants/acme/lifecycle', 'Lifecycle rules of logs');
    await waitText(viewer, 'drop-tmp');
    t.same(
      (await buttonTexts(viewer)).filter((text) => text !== 'Sign out'),
      [],
      'a viewer sees no control',
    );
    t.same(errors, [], 'no script error or CSP violation');
  },
  { env: { LIGHTWELL_LIFECYCLE_DAY: '1s', LIGHTWELL_LIFECYCLE_INTERVAL: '200ms' } },
);
