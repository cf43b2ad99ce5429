// The AWS SDK as the S3 tests use it: a path-style client of a test service's public port that
// never retries (a refusal must reach the test as it was sent), and a refusal read as its S3
// error name and HTTP status.
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import type { DataClient } from './service.js';

/** An SDK client of `origin` (the public listener's origin) signing with `key`. */
export function s3ClientFor(
  origin: string,
  key: Pick<DataClient, 'accessKeyId' | 'secretKey'>,
  secretKey = key.secretKey,
): S3Client {
  return new S3Client({
    endpoint: origin,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: key.accessKeyId, secretAccessKey: secretKey },
    maxAttempts: 1,
  });
}

/** The S3 error a call was refused with, or `{name: 'none'}` when it succeeded. */
export async function s3ErrorOf(run: Promise<unknown>): Promise<{ name: string; status: number }> {
  try {
    await run;
  } catch (error) {
    if (error instanceof S3ServiceException)
      return { name: error.name, status: error.$metadata.httpStatusCode ?? 0 };
    throw error;
  }
  return { name: 'none', status: 0 };
}
