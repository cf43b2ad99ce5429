// The console's client of the admin API and the console API: every call carries the admin token
// as a bearer header (the page never uses cookies), and every failure becomes an ApiError built
// from the answer's problem object, so the page can say what went wrong in the API's own words.

export interface Problem {
  readonly code: string;
  readonly message: string;
  readonly status: number;
  readonly requestId?: string;
  readonly blockers?: ReadonlyArray<{ code: string; message: string; count?: number }>;
}

export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

export const ADMIN = '/admin/api/v1';
export const CONSOLE = '/admin/console/api';

export type Role = 'viewer' | 'operator' | 'owner';

export interface Session {
  readonly tokenId: string;
  readonly role: Role;
  readonly tenant: string | null;
  readonly name: string | null;
  readonly expiresAt: string | null;
}

const RANK: Readonly<Record<Role, number>> = { viewer: 0, operator: 1, owner: 2 };

/** True when the session's role is at least `role`. */
export function allows(session: Session, role: Role): boolean {
  return RANK[session.role] >= RANK[role];
}

export class Api {
  constructor(private readonly token: string) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    const init: RequestInit = { method, headers, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response: Response;
    try {
      response = await fetch(path, init);
    } catch {
      throw new ApiError({
        code: 'unreachable',
        message: 'the admin listener did not answer; is the service running?',
        status: 0,
      });
    }
    const text = await response.text();
    let value: unknown;
    try {
      value = text === '' ? undefined : JSON.parse(text);
    } catch {
      value = undefined;
    }
    if (!response.ok) {
      const problem = value as Partial<Problem> | undefined;
      throw new ApiError({
        code: problem?.code ?? 'http_' + String(response.status),
        message: problem?.message ?? response.statusText,
        status: response.status,
        ...(problem?.requestId === undefined ? {} : { requestId: problem.requestId }),
        ...(problem?.blockers === undefined ? {} : { blockers: problem.blockers }),
      });
    }
    return value as T;
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>('GET', path);
  }
}

/** `text` for a path segment. */
export const seg = encodeURIComponent;

// ---- shapes of the answers the pages read ----------------------------------------------------

export interface Tenant {
  id: string;
  name: string;
  state: 'active' | 'disabled' | 'deleted';
  createdAt: string;
  disabledAt?: string;
  deletedAt?: string;
  deletion?: { state: string };
}
export interface Account {
  id: string;
  tenantId: string;
  name?: string;
  createdAt: string;
}
export interface AccessKey {
  accessKeyId: string;
  accountId: string;
  scopes: string;
  externalRef?: string;
  state: 'active' | 'revoked' | 'expired';
  createdAt: string;
  expiresAt?: string;
  rotatedAt?: string;
  revokedAt?: string;
  secretKey?: string;
}
export interface Quota {
  tenantId: string;
  maxBytes?: number;
  maxObjects?: number;
  usedBytes: number;
  usedObjects: number;
}
export interface Usage {
  tenantId: string;
  logicalBytes: number;
  physicalBytes: number;
  objects: number;
  versions: number;
  deleteMarkers: number;
  buckets: Array<{
    name: string;
    logicalBytes: number;
    objects: number;
    versions: number;
    deleteMarkers: number;
  }>;
}
export interface AuditEvent {
  id: string;
  time: string;
  requestId: string;
  tenantId?: string;
  actor: string;
  action: string;
  resource: string;
  outcome: 'allowed' | 'denied' | 'error';
  status: number;
  reason?: string;
  remoteAddr?: string;
  dryRun?: boolean;
}
export interface Plan {
  dryRun: boolean;
  applied: boolean;
  action: string;
  target: string;
  /** What the operation would touch; a membership change's plan has none (its own fields). */
  counts?: Record<string, number>;
  blockers: Array<{ code: string; message: string; count?: number }>;
  /** Things the change allows but the operator should know (a membership change's plan). */
  warnings?: Array<{ code: string; message: string }>;
  /** What the operation would leave (its shape is the operation's). */
  result?: unknown;
}
export interface ScrubSchedule {
  target: string;
  intervalHours: number;
  nextRunAt: string;
  createdAt: string;
  updatedAt: string;
  lastRun: null | {
    state: string;
    startedAt: string;
    finishedAt: string;
    tenants: number;
    versions: number;
    chunksVerified: number;
    bytesVerified: number;
    corruptChunks: number;
    corrupt: Array<{
      tenantId: string;
      bucket: string;
      key: string;
      versionId: string;
      problem: string;
    }>;
    error?: string;
  };
}
export interface TenantKeyState {
  tenantId: string;
  state: string;
  keyGeneration: number;
  retiredKeys: number;
  rotatedAt: string | null;
}
export interface AccessBlock {
  blockPublicAcls: boolean;
  ignorePublicAcls: boolean;
  blockPublicPolicy: boolean;
  restrictPublicBuckets: boolean;
}
export interface PublicAccess {
  tenantId: string;
  block: AccessBlock | null;
  buckets: Array<{ name: string; block: AccessBlock | null; effective: AccessBlock }>;
}
export interface BackupJob {
  name: string;
  state: 'queued' | 'running' | 'complete' | 'failed';
  base: string | null;
  /** A tenant's backup (segments* count its objects); null: the whole store. */
  tenant: string | null;
  /** The backup target it is uploaded to, and how far. */
  target: string | null;
  upload: { files: number; bytes: number; copied: number } | null;
  queuedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  snapshotAt: string | null;
  segmentsTotal: number;
  segmentsDone: number;
  segmentsReused: number;
  bytesTotal: number;
  bytesDone: number;
  counts: { tenants: number; buckets: number; versions: number; chunks: number } | null;
  error: string | null;
}
/** An S3 endpoint backups are uploaded to; its secret key is never answered. */
export interface BackupTarget {
  name: string;
  endpoint: string;
  region: string;
  bucket: string;
  prefix: string;
  accessKeyId: string;
  createdAt: string;
}
export interface RestoreJob {
  id: string;
  backup: string;
  tenantId: string;
  state: 'queued' | 'running' | 'complete' | 'failed';
  queuedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  objectsTotal: number;
  objectsDone: number;
  objectsSkipped: number;
  bytesTotal: number;
  bytesDone: number;
  bucketsCreated: number;
  error: string | null;
}
export interface Reencryption {
  tenantId: string;
  state: 'none' | 'running' | 'paused' | 'settling' | 'complete';
  keyGeneration: number;
  retiredKeys: number;
  startedAt: string | null;
  updatedAt: string | null;
  finishedAt: string | null;
  chunksTotal: number | null;
  chunksScanned: number;
  chunksRewritten: number;
  bytesRewritten: number;
  chunksUnreadable: number;
  unreadable: Array<{ chunkId: string; problem: string }>;
  keysDropped: number | null;
}
export interface KeyState {
  masterKey: { fingerprint: string | null; since: string | null };
  tenants: TenantKeyState[];
}
export interface MasterKeyRotation {
  rotatedAt: string;
  fingerprint: string;
  previousFingerprint: string;
  counts: { tenants: number; tenantKeys: number; accessKeys: number; webhookSecrets: number };
}
export interface PolicyStatement {
  effect: 'Deny';
  actions: string[];
  principals: string[];
  prefix?: string;
}
export interface BucketPolicy {
  version: 1;
  statements: PolicyStatement[];
}
export interface Bucket {
  name: string;
  createdAt: string;
  versioning: string;
  objectLock: boolean;
  cors: unknown[];
  notifications: Array<{ id: string; url: string; events: string[]; prefix?: string }>;
  policy: BucketPolicy | null;
}
export interface Member {
  id: string;
  name: string;
  address: string;
  state: string;
  zone?: string;
}
export interface CorruptChunk {
  chunkId: string;
  segmentId: number;
  offset: number;
  length: number;
  reason: string;
  foundBy: 'read' | 'scrub';
  action: 'read-refused' | 'reported';
  firstSeenAt: string;
  lastSeenAt: string;
  seen: number;
}
export interface ScrubJob {
  id: string;
  tenantId: string;
  bucket?: string;
  state: 'counting' | 'running' | 'complete' | 'cancelled' | 'failed';
  startedBy: string;
  startedAt: string;
  finishedAt?: string;
  progress: number;
  planned: { versions: number; chunkRefs: number; logicalBytes: number };
  counts: {
    versions: number;
    chunkRefs: number;
    chunksVerified: number;
    bytesVerified: number;
    corruptChunks: number;
  };
  corrupt: Array<{
    bucket: string;
    key: string;
    versionId: string;
    chunkIndex: number;
    chunkId: string;
    problem: string;
  }>;
  error?: string;
}
export interface LifecycleRule {
  id?: string;
  status: 'Enabled' | 'Disabled';
  filter?: {
    prefix?: string;
    tags?: Array<{ key: string; value: string }>;
    sizeGreaterThan?: number;
    sizeLessThan?: number;
  };
  expiration?: { days?: number; date?: string; expiredObjectDeleteMarker?: boolean };
  noncurrentExpiration?: { noncurrentDays: number; newerNoncurrentVersions?: number };
  abortIncompleteMultipartUpload?: { daysAfterInitiation: number };
}
export interface BucketLifecycle {
  tenantId: string;
  bucket: string;
  rules: LifecycleRule[];
  reindexing: boolean;
}
export interface LifecycleDue {
  key: string;
  versionId?: string;
  uploadId?: string;
  action: 'expire-current' | 'expire-noncurrent' | 'remove-marker' | 'abort';
  ruleId: string;
  dueAt: string;
  size?: number;
  locked?: boolean;
}
export interface LifecyclePreview {
  scanned: number;
  truncated: boolean;
  due: LifecycleDue[];
}
export interface PlacementNode {
  id: string;
  name: string;
  zone: string;
  state: string;
  storage: boolean;
  buckets: number;
  preferred: number;
}
export interface Placement {
  mode: 'single' | 'cluster';
  tenantId: string;
  replicationFactor: number;
  nodes: PlacementNode[];
  buckets: Array<{ name: string; replicas: string[] }>;
  truncated: boolean;
}
