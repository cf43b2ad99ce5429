// The S3-compatible API as the public listener mounts it: the dispatcher with its
// authentication and every module's handlers registered. A module of operations adds one
// `register…(api)` call here.

import { S3Api, type S3Services } from './api.js';
import { authenticateS3 } from './auth.js';
import { registerBuckets } from './buckets.js';
import { registerObjects } from './objects.js';
import { registerMultipart } from './multipart.js';
import { registerObjectExtras } from './object-extras.js';
import { registerObjectLock } from './object-lock.js';
import { registerTagging } from './tagging.js';
import { registerEncryption } from './encryption.js';
import { registerLifecycle } from './lifecycle.js';
import { serviceObjectStore } from './object-store.js';
import { registerAccessOps } from './access-ops.js';
import { registerCors } from './cors.js';
import { registerPostObject } from './post-object.js';
import { registerLogging } from './logging.js';
import { registerOwnership } from './ownership.js';

export function s3Api(services: S3Services): S3Api {
  const api = new S3Api(
    { ...services, objects: services.objects ?? serviceObjectStore(services) },
    authenticateS3,
  );
  registerBuckets(api);
  registerObjects(api);
  registerMultipart(api);
  registerObjectExtras(api);
  registerObjectLock(api);
  registerTagging(api);
  registerEncryption(api);
  registerLifecycle(api);
  registerAccessOps(api);
  registerCors(api);
  registerPostObject(api);
  registerLogging(api);
  registerOwnership(api);
  return api;
}
