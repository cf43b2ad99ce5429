// Goal: what a client is told of an error (`toProblem`, used by every response and by each entry
// of a batch delete): a refusal keeps its own status, code and message; a failure of the service
// (a corrupt record, a segment I/O error, any unknown throw) is `internal` with no detail, and
// an unreachable engine or a reclaimed chunk (retry) is `unavailable`; the answers that are not failures
// (quota, not implemented) keep theirs.
// The one table (`errorAnswer`) adds the HTTP headers each code's details call for.
// Method: one error of each kind through `toProblem` and `errorAnswer`.
import t from 'tap';
import {
  BEARER_CHALLENGE,
  CLIENT_5XX_CODES,
  errorAnswer,
  toProblem,
} from '../../src/http/error-answer.js';
import {
  BadRequest,
  ChunkGone,
  CorruptData,
  EngineUnavailable,
  InvalidRange,
  MethodNotAllowed,
  NotFound,
  NotImplemented,
  PreconditionFailed,
  QuotaExceeded,
  RateLimited,
  SegmentIoError,
  Unauthorized,
} from '../../src/util/errors.js';

t.test('refusals keep their code and message', async (t) => {
  t.match(toProblem(NotFound('object k not found')), {
    status: 404,
    code: 'not_found',
    message: 'object k not found',
  });
  t.match(toProblem(BadRequest('bad key')), { status: 400, code: 'bad_request' });
  t.match(toProblem(QuotaExceeded('over quota')), { status: 507, code: 'quota_exceeded' });
  t.match(toProblem(NotImplemented('sns targets')), { code: 'not_implemented' });
});

t.test('failures of the service say nothing of themselves', async (t) => {
  for (const error of [
    CorruptData('record failed authentication', { segmentId: 7 }),
    SegmentIoError('segment 7 ends before 4096'),
    new TypeError('x is undefined'),
    'a thrown string',
  ]) {
    const problem = toProblem(error);
    t.same(
      { status: problem.status, code: problem.code, message: problem.message },
      { status: 500, code: 'internal', message: 'internal error' },
      String(error),
    );
  }
  for (const error of [
    EngineUnavailable('the engine is not reachable at /data/engine.sock'),
    ChunkGone('a deduplicated chunk was reclaimed before the commit'),
  ]) {
    const problem = toProblem(error);
    t.equal(problem.status, 503, error.code);
    t.equal(problem.code, 'unavailable', error.code);
    t.notMatch(problem.message, /engine\.sock|reclaimed/, 'no internal detail');
  }
});

t.test('one table gives every API the headers and members of an error', async (t) => {
  t.same(
    errorAnswer(MethodNotAllowed('no', { allow: 'DELETE', deleteMarkerVersionId: 'v1' })).headers,
    {
      Allow: 'DELETE',
      'X-Service-Delete-Marker': 'true',
      'X-Service-Version-Id': 'v1',
    },
  );
  t.same(errorAnswer(Unauthorized('no')).headers, { 'WWW-Authenticate': BEARER_CHALLENGE });
  t.same(errorAnswer(InvalidRange('no', { size: 10 })).headers, { 'Content-Range': 'bytes */10' });
  t.same(errorAnswer(RateLimited('slow', { retryAfterSeconds: 2.5 })).headers, {
    'Retry-After': '3',
  });
  t.same(errorAnswer(EngineUnavailable('gone')).headers, { 'Retry-After': '1' });
  t.same(errorAnswer(BadRequest('no', { allow: 'GET' })).headers, {}, 'details of another code');
  const plan = { counts: { buckets: 1 }, blockers: [{ code: 'legal_hold', message: 'held' }] };
  t.same(errorAnswer(PreconditionFailed('gated', plan)).members, plan);
  for (const spec of [CorruptData, SegmentIoError, EngineUnavailable, QuotaExceeded])
    t.ok(CLIENT_5XX_CODES.has(errorAnswer(spec('x')).code), `${spec.code} is a code clients see`);
  t.equal(errorAnswer(CorruptData('x')).kind, 'failure');
  t.equal(errorAnswer(EngineUnavailable('x')).kind, 'passing');
  t.equal(errorAnswer(QuotaExceeded('x')).kind, 'refusal');
});
