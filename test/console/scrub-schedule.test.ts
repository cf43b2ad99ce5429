// Goal: scheduled scrubs from the console in a real browser. An owner sets a schedule of a
// tenant with "run now" on its Scrub tab; the engine runs it in the background and the page,
// which looks again while a schedule is due, shows the last run with the object whose chunk was
// damaged on disk; the schedule of every tenant is set the same way; removing a schedule removes
// it. A viewer sees the schedules and no control. No script error or CSP violation; the
// screenshot of docs/console.md is taken on the way.
// Method: `lightwell serve` on loopback, Debian's Chromium through puppeteer-core.
import { plantBadChunk } from './plant.js';
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
} from './browser.js';

browserTest(
  'scheduled scrubs are set and their findings read on the Scrub tab',
  async (t, { service, browser, errors }) => {
    const owner = service.adminToken('owner', ['--name', 'ops-owner']);
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
    t.equal((await data.put('photos', 'cat.jpg', 'not really a cat')).status, 200);
    t.equal((await data.put('photos', 'dog.jpg', 'not really a dog')).status, 200);
    await plantBadChunk(service.dataDir, 'acme', 'photos', 'cat.jpg');

    const page = await newPage(browser, errors);
    await signIn(page, service, owner);
    await go(page, '#/tenants/acme/scrub', 'Scheduled scrub of acme');
    await waitText(page, 'No schedule.');
    await fill(page, 'Interval in hours (acme)', '12');
    await press(page, 'Save and run acme now');
    await waitText(page, 'Every 12 h');
    await waitText(page, '1 corrupt');
    await waitText(page, 'cat.jpg');
    await fill(page, 'Interval in hours (every tenant)', '168');
    await press(page, 'Save schedule of every tenant');
    await waitText(page, 'Every 168 h');
    await screenshot(page, 'scrub-schedule');
    t.pass('the background run of the schedule shows the damaged object');

    const viewer = await newPage(browser, errors);
    await signIn(viewer, service, service.adminToken('viewer'));
    await go(viewer, '#/tenants/acme/scrub', 'Scheduled scrub of acme');
    await waitText(viewer, 'cat.jpg');
    t.notOk(
      (await buttonTexts(viewer)).some((text) => /schedule|run .* now/i.test(text)),
      'a viewer sees no schedule control',
    );

    await page.bringToFront(); // a page in the background renders no frames to click on
    await press(page, 'Remove schedule of acme');
    await waitText(page, 'No schedule.');
    t.same(errors, [], 'no script error or CSP violation');
  },
);
