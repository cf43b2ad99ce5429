// Goal: the engine client's calls are typed by the command map (src/engine/commands.ts): an
// unknown or renamed command, a missing or mistyped field, and a result read as another type
// fail to compile, on the caller's side, for transactional, read and per-connection commands
// and the put group (`putObjects`).
// Method: the calls below are compiled with the tests (`tsc -p tsconfig.json`); each
// `@ts-expect-error` fails the build if its line ever compiles. At run time, the map's names are
// the engine's tables' (a command added to a table is in the map).
import t from 'tap';
import type { CommandArgs, CommandName, CommandResult } from '../../src/engine/commands.js';
import { connectionCommands, operations, readOperations } from '../../src/engine/engine.js';
import type { EngineClient } from '../../src/engine/protocol.js';

/** Never called: only compiled. Answers what it read, so that nothing is unused. */
export async function typedCalls(client: EngineClient): Promise<unknown[]> {
  const read: unknown[] = [];
  const bucket = await client.call('createBucket', { tenantId: 't', name: 'b' });
  const id: number = bucket.id;
  read.push(id);
  // @ts-expect-error: no such command
  await client.call('createBuckett', { tenantId: 't', name: 'b' });
  // @ts-expect-error: createBucket names its bucket `name`
  await client.call('createBucket', { tenantId: 't', bucket: 'b' });
  // @ts-expect-error: tenantId is a string
  await client.call('deleteObject', { tenantId: 1, bucket: 'b', key: 'k' });
  const limited = await client.call('takeMintToken', { accessKeyId: 'AK@127.0.0.1' });
  // @ts-expect-error: a rate-limit answer has no `tokens`
  read.push(limited.tokens);
  const step = await client.call('scrubTenantChunks', { tenantId: 't', verify: false });
  // @ts-expect-error: a scrub step counts chunks, it is not a list
  read.push(step.length);
  // The group of putObject commands, run before the dispatcher, is typed as the tables are.
  const answers = await client.call('putObjects', { items: [] });
  for (const answer of answers) read.push('e' in answer ? answer.e.code : answer.r.versionId);
  // @ts-expect-error: a group's items are putObject commands
  await client.call('putObjects', { items: [{ tenantId: 't', bucket: 'b', key: 'k' }] });
  // A relayed name is unchecked, and says so.
  read.push(await client.callUnchecked('anything', {}));
  return read;
}

t.test("the map's names are the engine's tables'", async (t) => {
  const names: CommandName[] = [
    ...(Object.keys(operations) as CommandName[]),
    ...(Object.keys(readOperations) as CommandName[]),
    ...(Object.keys(connectionCommands) as CommandName[]),
  ];
  t.equal(new Set(names).size, names.length, 'no command is in two tables');
  for (const name of ['putObject', 'scrubTenantChunks', 'takeMintToken', 'pinSegments'])
    t.ok(names.includes(name as CommandName), name);
  // A compile-time sample of the map, read back at run time.
  const args: CommandArgs<'deleteBucket'> = { tenantId: 't', name: 'b' };
  const result: CommandResult<'ping'> = { ok: true };
  t.same([args.name, result.ok], ['b', true]);
});
