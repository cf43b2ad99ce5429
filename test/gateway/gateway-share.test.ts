// Goal: the gateways that serve starts, and the listener threads of each gateway, share the
// service's upload and download budget, and the gateways share its automatic pool size, so that
// neither `--gateways N` nor more listeners multiply the service's memory; each listener's arena
// still holds one upload's reserve, and an explicit `workers` or `gateway_threads` stays per
// gateway.
import t from 'tap';
import { loadSettings } from '../../src/util/config.js';
import { gatewayShare } from '../../src/gateway/gateway.js';
import { reserveBlocks } from '../../src/service/upload.js';

const MiB = 1024 * 1024;

t.test(
  'one gateway: a listener per core up to four, a pool thread per core and one more',
  async (t) => {
    t.same(gatewayShare(loadSettings({}), 1), { listeners: 1, arenaBlocks: 64, threads: 2 });
    t.same(gatewayShare(loadSettings({}), 2), { listeners: 2, arenaBlocks: 32, threads: 3 });
    // At the default budget, two: each listener's arena keeps room for two uploads' reserves.
    t.same(gatewayShare(loadSettings({}), 16), { listeners: 2, arenaBlocks: 32, threads: 17 });
    const larger = loadSettings({ flags: { 'limits.inflight_bytes_max': '256MiB' } });
    t.same(gatewayShare(larger, 16), { listeners: 4, arenaBlocks: 64, threads: 17 });
    t.same(gatewayShare(larger, 3), { listeners: 3, arenaBlocks: 85, threads: 4 });
  },
);

t.test('several gateways split the budget, the listeners and the automatic pool', async (t) => {
  const two = loadSettings({ flags: { gateways: '2' } });
  t.same(gatewayShare(two, 2), { listeners: 1, arenaBlocks: 32, threads: 2 });
  const four = loadSettings({ flags: { gateways: '4', 'limits.inflight_bytes_max': '256MiB' } });
  t.same(gatewayShare(four, 16), { listeners: 1, arenaBlocks: 64, threads: 5 });
  // More gateways than cores still leaves each gateway a listener and a pool thread.
  t.same(gatewayShare(loadSettings({ flags: { gateways: '8' } }), 2), {
    listeners: 1,
    arenaBlocks: 16,
    threads: 1,
  });
});

t.test("every listener keeps one upload's reserve, whatever the split", async (t) => {
  for (const chunk of ['1MiB', '2MiB']) {
    const settings = loadSettings({
      flags: { gateways: '8', 'storage.chunk_bytes_avg': chunk },
    });
    const reserve = reserveBlocks(
      Number.MAX_SAFE_INTEGER,
      settings.bytes('storage.chunk_bytes_avg'),
      MiB,
    );
    t.ok(reserve * MiB > (64 * MiB) / 8, `the reserve (${reserve} blocks) is over the share`);
    t.equal(gatewayShare(settings, 2).arenaBlocks, reserve);
  }
  const threads = loadSettings({ flags: { gateway_threads: '8' } });
  t.equal(gatewayShare(threads, 2).arenaBlocks, 16);
});

t.test('an explicit pool size or listener count is per gateway', async (t) => {
  const settings = loadSettings({ flags: { gateways: '2', workers: '3', gateway_threads: '3' } });
  t.same(gatewayShare(settings, 2), { listeners: 3, arenaBlocks: 16, threads: 3 });
});
