// Goal: on the public port, every path outside /api/v1 is the S3 API, answered in S3's form
// (XML errors with x-amz-request-id and x-amz-id-2), while /api/v1 stays the native API.
// Method: a real `lightwell serve`, plain fetch.
import t from 'tap';
import { Service } from '../helpers/service.js';

t.test('the S3 API answers every path outside /api/v1', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');

  const native = await fetch(`${service.publicUrl}/healthz`);
  t.equal(native.status, 200, 'the native API is still at /api/v1');
  t.equal(native.headers.get('x-amz-request-id'), null);

  const anonymous = await fetch(`${origin}/`);
  t.equal(anonymous.status, 403);
  t.match(anonymous.headers.get('content-type'), /application\/xml/);
  const requestId = anonymous.headers.get('x-amz-request-id');
  t.ok(requestId, 'x-amz-request-id');
  t.ok(anonymous.headers.get('x-amz-id-2'), 'x-amz-id-2');
  const body = await anonymous.text();
  t.match(body, /<Error><Code>AccessDenied<\/Code><Message>[^<]+<\/Message>/);
  t.match(body, `<Resource>/</Resource><RequestId>${requestId ?? ''}</RequestId>`);

  const unknown = await fetch(`${origin}/some-bucket?frobnicate`);
  t.equal(unknown.status, 501);
  t.match(await unknown.text(), /<Code>NotImplemented<\/Code>/);

  // A path that only starts like a reserved prefix is S3's (`/api` and `/admin` are reserved
  // bucket names, whose paths the public port answers as the native API does).
  const lookalike = await fetch(`${origin}/apiv1`, { method: 'PATCH' });
  t.equal(lookalike.status, 405);
  t.match(await lookalike.text(), /<Code>MethodNotAllowed<\/Code>/);

  const head = await fetch(`${origin}/`, { method: 'HEAD' });
  t.equal(head.status, 403, 'HEAD answers the status without a body');
  t.ok(head.headers.get('x-amz-request-id'));
});
