/**
 * `hoptrace decode`: human lines, NDJSON shape, flags and clear errors with exit codes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { runDecode } from '../../cli/decode';
import { utcPacketTime } from '../../core/report/times';
import { PCAPS } from './corpus';

const pcaps = PCAPS;

function run(argv: string[]): { code: number; lines: string[]; stderr: string } {
  const lines: string[] = [];
  let stderr = '';
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk: string | Uint8Array): boolean => {
    stderr += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  };
  try {
    const code = runDecode(argv, (l) => lines.push(l));
    return { code, lines, stderr };
  } finally {
    process.stderr.write = orig;
  }
}

void t.test('human output: one line per frame', (t) => {
  const r = run([join(pcaps, 'tcpdump_vxlan.pcap')]);
  t.equal(r.code, 0);
  t.equal(r.lines.length, 10);
  t.equal(
    r.lines[0],
    '1 2013-05-18T20:21:44.837063Z ethernet ipv4 udp vxlan ethernet ipv4 icmp 192.168.203.3 > 192.168.203.5 [outer 192.168.203.1:45149 > 192.168.202.1:4789] vxlan:100 id 0 len 56',
  );
  const http = run([join(pcaps, 'zeek_http-get.pcap')]);
  t.match(
    http.lines[1],
    /^2 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ethernet ipv4 tcp 192\.150\.187\.43:80 > 141\.142\.228\.5:59856 flags S\. seq 2779762238 ack 4263588411 /,
  );
  t.end();
});

void t.test('--json: exactly the documented keys per frame', (t) => {
  const r = run(['--json', join(pcaps, 'tcpdump_vxlan.pcap')]);
  t.equal(r.code, 0);
  const o = JSON.parse(r.lines[1] ?? '{}') as Record<string, unknown>;
  t.same(Object.keys(o), ['frame', 'time', 'linktype', 'layers', 'outer', 'inner', 'truncated']);
  t.same(o, {
    frame: 2,
    time: '2013-05-18T20:21:44.882198Z',
    linktype: 'ethernet',
    layers: ['ethernet', 'ipv4', 'udp', 'vxlan', 'ethernet', 'arp'],
    outer: { proto: 'udp', src: '192.168.202.1', dst: '192.168.203.1', sport: 42710, dport: 4789 },
    inner: { proto: 'udp', src: '192.168.202.1', dst: '192.168.203.1', sport: 42710, dport: 4789 },
    truncated: false,
  });
  const tr = run(['--json', join(pcaps, 'zeek_ip4-trunc.pcap')]);
  t.match(JSON.parse(tr.lines[0] ?? '{}'), {
    truncated: true,
    error: 'DECODE_TRUNCATED',
    inner: null,
  });
  t.end();
});

// Each frame's time against tcpdump's (the oracles were written with TZ=UTC): the time of day
// of every frame tcpdump printed, in every capture of the corpus it read. A nanosecond file's
// extra digits follow the microseconds tcpdump prints.
void t.test("times: UTC, the same as tcpdump's for every frame of the corpus", (t) => {
  let compared = 0;
  for (const oracle of readdirSync(pcaps).filter((f) => f.endsWith('.tcpdump.txt'))) {
    const file = oracle.slice(0, -'.tcpdump.txt'.length);
    // The first command's output only (`tcpdump -nn -c 20 -r`; a verbose one follows).
    const want = (readFileSync(join(pcaps, oracle), 'utf8').split(/^\$ /m)[1] ?? '')
      .split('\n')
      .map((l) => /^(\d\d:\d\d:\d\d\.\d{6}) /.exec(l)?.[1])
      .filter((x): x is string => x !== undefined);
    if (want.length === 0) continue;
    const r = run(['--json', join(pcaps, file)]);
    const got = r.lines.slice(0, want.length).map((l) => {
      const time = (JSON.parse(l) as { time: string }).time;
      t.match(time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.(\d{6}|\d{9})Z$/, file);
      return time.slice(11, 26);
    });
    t.same(got, want, file);
    compared += want.length;
  }
  t.ok(compared > 300, `${compared} frames compared`);
  t.end();
});

void t.test('times: the nanoseconds a file has are printed, none it lacks', (t) => {
  t.equal(utcPacketTime(1_700_000_000_123_456_789n), '2023-11-14T22:13:20.123456789Z');
  t.equal(utcPacketTime(1_700_000_000_123_456_000n), '2023-11-14T22:13:20.123456Z');
  t.equal(utcPacketTime(1_700_000_000_000_000_001n), '2023-11-14T22:13:20.000000001Z');
  t.end();
});

void t.test('--vxlan-port adds a port ("Decode As")', (t) => {
  const plain = run([
    '--json',
    '--vxlan-port',
    '4789',
    join(pcaps, 'tcpdump_vxlan_port_8472.pcap'),
  ]);
  t.match(JSON.parse(plain.lines[0] ?? '{}'), {
    layers: ['ethernet', 'ipv4', 'udp', 'vxlan', 'ethernet', 'ipv4', 'icmp'],
  });
  t.end();
});

void t.test('errors: code, what, where, what to do; non-zero exit; no stack trace', (t) => {
  const cases: [string[], number, string][] = [
    [[], 2, 'CLI_USAGE'],
    [['--frobnicate', 'x.pcap'], 2, 'CLI_USAGE'],
    [['--vxlan-port', 'abc', 'x.pcap'], 2, 'CLI_USAGE'],
    [['a.pcap', 'b.pcap'], 2, 'CLI_USAGE'],
    [[join(pcaps, 'does-not-exist.pcap')], 1, 'FILE_NOT_FOUND'],
    [[join(pcaps, 'libpcap_shb-option-too-long.pcapng')], 1, 'FILE_BAD_BLOCK'],
    [[join(pcaps, 'README.md')], 1, 'FILE_BAD_MAGIC'],
  ];
  for (const [argv, code, err] of cases) {
    const r = run(argv);
    t.equal(r.code, code, `${argv.join(' ')} exit code`);
    t.match(r.stderr, new RegExp(`^hoptrace: ${err}: `), `${argv.join(' ')} names ${err}`);
    t.equal(r.stderr.split('\n').length, 2, 'on one line, as every command says an error');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  t.end();
});
