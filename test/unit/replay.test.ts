/**
 * File replay yields the same PacketEvent a live agent sends: every field filled.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import { replayCaptureFile } from '../../offline/replay';
import { PCAPS } from './corpus';

const pcaps = PCAPS;

void t.test('replay of an Ethernet pcap: events in order with tuples, keys and timestamps', (t) => {
  const events = [
    ...replayCaptureFile(join(pcaps, 'zeek_http-get.pcap'), { point: 'pod', node: 'n1' }),
  ];
  t.equal(events.length, 14);
  const first = events[0];
  t.match(first, {
    point: 'pod',
    node: 'n1',
    iface: 'file',
    linktype: 'ethernet',
    frame: 1,
    outer: null,
    inner: { proto: 'tcp', src: '141.142.228.5', dst: '192.150.187.43', sport: 59856, dport: 80 },
    tunnels: [],
    keys: { tcpFlags: 2, payloadLength: 0 },
    truncated: false,
  });
  t.type(first?.tsNs, 'bigint');
  t.ok((first?.tsNs ?? 0n) > 1_000_000_000_000_000_000n, 'nanoseconds since the epoch');
  t.ok((first?.wireLength ?? 0) >= 54);
  t.same(
    events.map((e) => e.frame),
    Array.from({ length: 14 }, (_, i) => i + 1),
  );
  const get = events[3];
  t.ok(
    get?.keys.requestLineHash !== undefined && get.keys.payloadHash !== undefined,
    'request frame has payload hashes',
  );
  t.end();
});

void t.test(
  'iface: pcapng if_name, else ctx.iface, else "file"; tunnels and errors carried',
  (t) => {
    const vx = [
      ...replayCaptureFile(join(pcaps, 'tcpdump_vxlan.pcap'), {
        point: 'node',
        node: 'n2',
        iface: 'eth0',
      }),
    ];
    t.equal(vx[0]?.iface, 'eth0');
    t.same(vx[0]?.tunnels, [{ kind: 'vxlan', id: 100 }]);
    t.ok(vx[0]?.outer !== null);
    const trunc = [
      ...replayCaptureFile(join(pcaps, 'zeek_ip4-trunc.pcap'), { point: 'p', node: 'n' }),
    ];
    t.equal(trunc[0]?.truncated, true);
    t.equal(trunc[0]?.error, 'DECODE_TRUNCATED');
    const icmp = [
      ...replayCaptureFile(join(pcaps, 'zeek_icmp-destunreach-udp.pcap'), {
        point: 'p',
        node: 'n',
      }),
    ];
    t.match(icmp[0]?.related, { proto: 'udp', sport: 53, dport: 59207 });

    // Minimal little-endian pcapng: SHB, IDB (Ethernet, if_name "vxlan.calico"), one EPB.
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-replay-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const hex = [
      '0a0d0d0a 1c000000 4d3c2b1a 0100 0000 ffffffffffffffff 1c000000', // SHB, 28 bytes
      '01000000 28000000 0100 0000 00000400', // IDB, 40 bytes: Ethernet, snaplen 262144
      '0200 0c00 76786c616e2e63616c69636f 0000 0000 28000000', // if_name "vxlan.calico", end
      '06000000 24000000 00000000 00000000 01000000 04000000 04000000 01020304 24000000', // EPB
    ]
      .join('')
      .replace(/ /g, '');
    const p = join(dir, 'x.pcapng');
    writeFileSync(p, Buffer.from(hex, 'hex'));
    const ev = [...replayCaptureFile(p, { point: 'p', node: 'n', iface: 'ignored' })];
    t.equal(ev.length, 1);
    t.equal(ev[0]?.iface, 'vxlan.calico');
    t.equal(ev[0]?.truncated, true, '4 bytes of Ethernet are a truncated frame');
    t.end();
  },
);

void t.test('unreadable files throw HoptraceError', (t) => {
  const file = join(pcaps, 'libpcap_pcap-invalid-version-1.pcap');
  let code = 'no error';
  try {
    for (const ev of replayCaptureFile(file, { point: 'p', node: 'n' }))
      t.fail(`unexpected event ${ev.frame}`);
  } catch (e) {
    code = isHoptraceError(e) ? e.code : String(e);
  }
  t.equal(code, 'FILE_BAD_VERSION');
  t.end();
});
