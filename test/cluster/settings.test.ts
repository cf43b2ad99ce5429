// Goal: the cluster settings as DECISIONS.md spells them on the command line: `--cluster.bootstrap`
// alone means yes (also before another option, or last), an explicit value still works; cluster
// addresses must be reachable by other nodes (no wildcard host, no port 0), etcd's ports default
// to the host of `cluster.listen`; external endpoints must be URLs.
// Method: parseArgs, settingsFrom and clusterEndpoints on argument lists, no process started.
import t from 'tap';
import { parseArgs, settingsFrom } from '../../src/cli/args.js';
import { clusterEndpoints } from '../../src/cluster/addresses.js';

const settingsOf = (argv: string[]) => settingsFrom(parseArgs(argv));

t.test('--cluster.bootstrap is a flag', async (t) => {
  t.equal(settingsOf(['--cluster.bootstrap']).bool('cluster.bootstrap'), true, 'last');
  const before = settingsOf(['--cluster.bootstrap', '--cluster.node_id', 'n1']);
  t.equal(before.bool('cluster.bootstrap'), true, 'before another option');
  t.equal(before.string('cluster.node_id'), 'n1');
  t.equal(settingsOf(['--cluster.bootstrap', 'false']).bool('cluster.bootstrap'), false);
  t.equal(settingsOf([]).bool('cluster.bootstrap'), false, 'off by default');
  t.equal(settingsOf([]).string('cluster.listen'), '', 'a single node by default');
});

t.test('cluster addresses', async (t) => {
  const addresses = clusterEndpoints(settingsOf(['--cluster.listen', '10.0.0.5:7000']));
  t.same(addresses, {
    listen: { host: '10.0.0.5', port: 7000 },
    listenText: '10.0.0.5:7000',
    clientUrl: 'http://10.0.0.5:2379',
    peerUrl: 'http://10.0.0.5:2380',
    external: [],
  });
  const own = clusterEndpoints(
    settingsOf([
      '--cluster.listen',
      '10.0.0.5:7000',
      '--cluster.etcd_client_listen',
      '10.0.0.5:12379',
      '--cluster.etcd_endpoints',
      'http://10.0.0.9:2379, http://10.0.0.10:2379',
    ]),
  );
  t.equal(own.clientUrl, 'http://10.0.0.5:12379');
  t.same(own.external, ['http://10.0.0.9:2379', 'http://10.0.0.10:2379']);
  for (const argv of [
    ['--cluster.listen', '0.0.0.0:7000'],
    ['--cluster.listen', '10.0.0.5:0'],
    ['--cluster.listen', '10.0.0.5:7000', '--cluster.etcd_peer_listen', ':2380'],
    ['--cluster.listen', '10.0.0.5:7000', '--cluster.etcd_endpoints', 'etcd:2379'],
  ])
    t.throws(() => clusterEndpoints(settingsOf(argv)), { code: 'bad_request' }, argv.join(' '));
});
