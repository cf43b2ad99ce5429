// The error lightwell/client rejects with: the problem object the service answered (RFC 9457
// fields plus `code`, `message` and `requestId`, docs/errors.md), as an Error so that stacks and
// `instanceof` work, or one the client made itself when no answer came (`code` then says why:
// `connection_lost`, `closed`, `protocol_error`).

export interface ProblemFields {
  readonly type?: string;
  readonly title?: string;
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly detail?: string;
  readonly requestId?: string | undefined;
  readonly [field: string]: unknown;
}

export class LightwellProblem extends Error {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly code: string;
  readonly requestId: string | undefined;
  readonly problem: ProblemFields;

  constructor(problem: ProblemFields) {
    super(problem.message);
    this.name = 'LightwellProblem';
    this.problem = problem;
    this.status = problem.status;
    this.code = problem.code;
    this.type = problem.type ?? `https://lightwell.dev/problems/${problem.code}`;
    this.title = problem.title ?? problem.code;
    this.requestId = problem.requestId;
  }

  /** The problem object as the service sent it. */
  toJSON(): ProblemFields {
    return this.problem;
  }
}

/** A problem from an answer's JSON, or one describing an answer that was not a problem. */
export function problemOf(json: unknown, status: number): LightwellProblem {
  const fields = json as Partial<ProblemFields> | undefined;
  if (fields && typeof fields.code === 'string' && typeof fields.message === 'string')
    return new LightwellProblem({ ...fields, status, code: fields.code, message: fields.message });
  return new LightwellProblem({ status, code: 'unexpected_answer', message: `HTTP ${status}` });
}

export function clientProblem(code: string, message: string): LightwellProblem {
  return new LightwellProblem({ status: 0, code, message });
}
