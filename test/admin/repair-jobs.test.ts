// Goal: a rebalance answers its report when done within ANSWER_MS_MAX, and otherwise goes on as a
// job (DECISIONS.md: 202 with `{jobId, state}`) whose state and report are kept for
// `GET /cluster/repair/jobs/{jobId}`; a failure after the answer is the job's, an unknown id 404.
// Method: RepairJobs with work promises the test settles itself (no clock: a budget of 0 makes
// the job at once, a settled promise with a long budget is answered directly).
import t from 'tap';
import { RepairJobs } from '../../src/admin/repair-jobs.js';
import { BadRequest } from '../../src/util/errors.js';

function deferred(): {
  promise: Promise<Record<string, unknown>>;
  resolve: (value: Record<string, unknown>) => void;
  reject: (error: unknown) => void;
} {
  let resolve!: (value: Record<string, unknown>) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<Record<string, unknown>>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

t.test('quick work is answered, slow work becomes a job', async (t) => {
  const jobs = new RepairJobs();
  const quick = await jobs.run('t1', Promise.resolve({ applied: true }), 60_000);
  t.same(quick, { done: { applied: true } }, 'done within the budget: the report itself');

  const slow = deferred();
  const outcome = await jobs.run('t1', slow.promise, 0);
  if (!('job' in outcome)) throw new Error('expected a job');
  t.match(outcome.job, { jobId: /^rj_[0-9a-f]{24}$/, state: 'running', tenantId: 't1' });
  t.equal(jobs.get(outcome.job.jobId).state, 'running', 'running until the work ends');
  slow.resolve({ applied: true, complete: true });
  await slow.promise;
  await new Promise<void>((resolve) => setImmediate(resolve));
  const done = jobs.get(outcome.job.jobId);
  t.equal(done.state, 'succeeded');
  t.same(done.result, { applied: true, complete: true }, 'the report is kept');
  t.type(done.finishedAt, 'string');
});

t.test('a failure: thrown within the budget, recorded after it', async (t) => {
  const jobs = new RepairJobs();
  await t.rejects(jobs.run('t1', Promise.reject(BadRequest('no')), 60_000), {
    code: 'bad_request',
  });
  const failing = deferred();
  const outcome = await jobs.run('t1', failing.promise, 0);
  if (!('job' in outcome)) throw new Error('expected a job');
  failing.reject(BadRequest('replica refused'));
  await failing.promise.catch(() => undefined);
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.match(jobs.get(outcome.job.jobId), {
    state: 'failed',
    error: { code: 'bad_request', message: 'replica refused' },
  });
  t.throws(() => jobs.get('rj_unknown'), { code: 'not_found' }, 'an unknown job is a 404');
});

t.test('a running job shows its progress as the work updates it', async (t) => {
  const jobs = new RepairJobs();
  const slow = deferred();
  const progress: Record<string, unknown> = { phase: 'scrub', scrub: { chunksVerified: 0 } };
  const outcome = await jobs.run('t1', slow.promise, 0, progress);
  if (!('job' in outcome)) throw new Error('expected a job');
  t.match(JSON.parse(JSON.stringify(jobs.get(outcome.job.jobId))), {
    state: 'running',
    progress: { phase: 'scrub', scrub: { chunksVerified: 0 } },
  });
  progress['phase'] = 'replicas';
  progress['scrub'] = { chunksVerified: 12 };
  t.match(JSON.parse(JSON.stringify(jobs.get(outcome.job.jobId))), {
    progress: { phase: 'replicas', scrub: { chunksVerified: 12 } },
  });
  slow.resolve({ complete: true });
  await slow.promise;
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.match(jobs.get(outcome.job.jobId), { state: 'succeeded', result: { complete: true } });
});
