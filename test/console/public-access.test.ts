// Goal: the tenant's Public access tab in a real browser. An operator of the tenant turns on
// "Block public policies", previews the change (the plan counts the tenant's buckets), saves
// it, and sees it in force on each bucket; the S3 API then refuses a bucket policy that allows
// anyone. A viewer sees the switches disabled and no control. No script error or CSP violation.
// The tab's screenshot is taken for docs/console.md.
// Method: `lightwell serve` on loopback, Debian's Chromium through puppeteer-core, S3 through
// the AWS SDK.
import { PutBucketPolicyCommand } from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import {
  browserTest,
  newPage,
  screenshot,
  buttonTexts,
  waitText,
  press,
  go,
  signIn,
} from './browser.js';

browserTest(
  "a tenant's public access block from its Public access tab",
  async (t, { service, browser, errors }) => {
    const owner = service.adminToken('owner');
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'site' } })).status, 201);
    const s3 = s3ClientFor(service.publicUrl.replace(/\/api\/v1$/, ''), data);
    t.teardown(() => s3.destroy());

    const page = await newPage(browser, errors);
    await signIn(page, service, service.adminToken('operator', ['--tenant', 'acme']));
    await go(page, '#/tenants/acme/access', 'Public access block of the tenant');
    await page.locator('label.switch ::-p-text(Block public policies) input').click();
    await press(page, 'Preview: save public access block');
    await waitText(page, 'Plan for putConsolePublicAccessBlock');
    await press(page, 'Confirm: save public access block');
    await waitText(page, 'Public access block of acme saved.');
    await waitText(page, 'Block public policies');
    await screenshot(page, 'public-access');
    const refused = await s3ErrorOf(
      s3.send(
        new PutBucketPolicyCommand({
          Bucket: 'site',
          Policy: JSON.stringify({
            Version: '2012-10-17',
            Statement: [
              {
                Effect: 'Allow',
                Principal: '*',
                Action: 's3:GetObject',
                Resource: 'arn:aws:s3:::site/*',
              },
            ],
          }),
        }),
      ),
    );
    t.equal(refused.status, 403, 'the S3 API refuses a public policy under the block');

    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    await go(viewer, '#/tenants/acme/access', 'Public access block of the tenant');
    t.same(
      (await buttonTexts(viewer)).filter((text) => text !== 'Sign out'),
      [],
      'a viewer sees no control',
    );
    t.ok(await viewer.$('fieldset.switches[disabled]'), 'a viewer sees the switches disabled');
    t.same(errors, [], 'no script error or CSP violation');
  },
);
