// Goal: the corrupt-chunk records the engine keeps, in the console. A chunk damaged on disk and
// then read (the read answers 500 and is recorded) is listed by `GET /tenants/{id}/corrupt-chunks`
// with its chunk id, place, problem and finder, on the admin gates (401 without a token, 403 for
// a token scoped to another tenant, 404 for an unknown tenant; another tenant's list stays
// empty); the tenant's Scrub tab shows it with what the operator can do, and the scrub it points
// to names the object. No script error or CSP violation; screenshot for docs/console.md.
// Method: the real service on loopback, a payload byte flipped on disk (plant.ts), Chromium
// through puppeteer-core (browserTest).
import { randomBytes } from 'node:crypto';
import {
  browserTest,
  go,
  newPage,
  press,
  screenshot,
  signIn,
  textOf,
  waitText,
} from './browser.js';
import { consoleCaller } from './console-call.js';
import { plantBadChunk } from './plant.js';

interface Records {
  chunks: Array<{ chunkId: string; foundBy: string; action: string; seen: number }>;
}

browserTest(
  'damaged chunks on record are listed with what to do about them',
  async (t, { service, browser, errors }) => {
    const call = consoleCaller(service);
    const owner = service.adminToken('owner');
    const data = await service.tenant('acme', 'read,write,delete,admin', owner);
    await service.tenant('globex', 'read,write,delete,admin', owner);
    const otherScope = service.adminToken('viewer', ['--tenant', 'globex']);
    t.equal((await data.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
    t.equal((await data.put('photos', 'intact.jpg', randomBytes(40_000))).status, 200);
    t.equal((await data.put('photos', 'cat.jpg', randomBytes(60_000))).status, 200);
    t.match(await call('GET', '/tenants/acme/corrupt-chunks', owner), {
      status: 200,
      json: { tenantId: 'acme', chunks: [], truncated: false },
    });
    const chunkId = await plantBadChunk(service.dataDir, 'acme', 'photos', 'cat.jpg');
    t.equal((await data.get('photos', 'cat.jpg')).status, 500, 'the damaged object is refused');

    // The gateway reports the chunk without holding up the read's answer.
    let records: Records = { chunks: [] };
    const deadline = Date.now() + 60_000;
    while (records.chunks.length === 0) {
      if (Date.now() > deadline) throw new Error('waited 60 s for the corrupt-chunk record');
      records = (await call('GET', '/tenants/acme/corrupt-chunks', owner)).json as Records;
      if (records.chunks.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.match(records.chunks, [{ chunkId, foundBy: 'read', action: 'read-refused', seen: 1 }]);
    t.match(await call('GET', '/tenants/acme/corrupt-chunks'), { status: 401 });
    t.match(await call('GET', '/tenants/acme/corrupt-chunks', otherScope), { status: 403 });
    t.match(await call('GET', '/tenants/nobody/corrupt-chunks', owner), { status: 404 });
    t.match(await call('GET', '/tenants/globex/corrupt-chunks', otherScope), {
      status: 200,
      json: { chunks: [] },
    });

    const page = await newPage(browser, errors);
    await signIn(page, service, owner);
    await go(page, '#/tenants/acme/scrub', 'Damaged chunks on record');
    await page.waitForSelector('table[aria-label="Damaged chunks on record"]');
    const listed = await textOf(page, 'table[aria-label="Damaged chunks on record"]');
    t.match(listed, chunkId.slice(0, 16), 'the chunk is listed');
    t.match(listed, /a read \(refused/, 'with what found it');
    await waitText(page, 'run a scrub of the tenant below');
    await press(page, 'Preview: start scrub');
    await page.waitForSelector('.plan');
    await press(page, 'Confirm: start scrub');
    await waitText(page, 'complete');
    await waitText(page, 'cat.jpg');
    await screenshot(page, 'corrupt-chunks');
    t.same(errors, [], 'no script error or CSP violation');
  },
);
