// Goal: what a client is told of an error (`toProblem`, used by every response and by each entry
// of a batch delete): a refusal keeps its own status, code and message; a failure of the service
// (a corrupt record, a segment I/O error, any unknown throw) is `internal` with no detail, and
// an unreachable engine or a reclaimed chunk (retry) is `unavailable`; the answers that are not failures
// (quota, not implemented) keep theirs.
// Method: one error of each kind through `toProblem`.
import t from 'tap';
import { toProblem } from '../../src/http/exchange.js';
import {
  BadRequest,
  ChunkGone,
  CorruptData,
  EngineUnavailable,
  NotFound,
  NotImplemented,
  QuotaExceeded,
  SegmentIoError,
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
