/**
 * --client and --dst are compared as strings with the addresses the decoder writes (RFC 5952 for
 * IPv6), so an IPv6 address typed another way — upper case, uncompressed, leading zeros — is
 * turned into that form once, after it is checked (cli/analyze-args.ts canonicalIP): before, it
 * selected no request at all (CLI_NO_REQUEST "no new TCP connection … from client 2001:DB8::1").
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { canonicalIP } from '../../common/address';
import { parseDstArg } from '../../cli/analyze-args';
import { runAnalyze } from '../../cli/analyze';

void t.test('canonicalIP: the decoder form of every way to write an address', (t) => {
  const cases: [string, string | null][] = [
    ['2001:db8::1', '2001:db8::1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:db8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:0DB8:0000:0000:0001:0000:0000:0001', '2001:db8::1:0:0:1'],
    ['::FFFF:10.0.0.1', '::ffff:10.0.0.1'],
    ['::1.2.3.4', '::102:304'],
    ['fe80::1%eth0', 'fe80::1'],
    ['::', '::'],
    ['10.90.0.42', '10.90.0.42'],
    ['010.90.0.42', null],
    ['2001:db8::1::2', null],
    ['x', null],
  ];
  for (const [typed, canonical] of cases) t.equal(canonicalIP(typed), canonical, typed);
  t.same(parseDstArg('[2001:DB8::10]:80'), { dst: '2001:db8::10', dport: 80 });
  t.same(parseDstArg('2001:DB8:0::10'), { dst: '2001:db8::10' });
  t.end();
});

// Ethernet[IPv6[TCP]]: a SYN, SYN-ACK and GET from 2001:db8::1 to SERVICE:80 at decap, to
// BACKEND:8080 at backend (the client address preserved).
const CLIENT = '20010db8000000000000000000000001';
const SERVICE = '20010db8000000000000000000000010';
const BACKEND = '20010db8000000000000000000000020';

function frame(
  src: string,
  dst: string,
  sport: number,
  dport: number,
  seq: number,
  flags: number,
  ack = 0,
  data = Buffer.alloc(0),
): Buffer {
  const eth = Buffer.from('020000000002020000000001' + '86dd', 'hex');
  const ip = Buffer.alloc(40);
  ip[0] = 0x60;
  ip.writeUInt16BE(20 + data.length, 4);
  ip[6] = 6; // TCP
  ip[7] = 64;
  Buffer.from(src, 'hex').copy(ip, 8);
  Buffer.from(dst, 'hex').copy(ip, 24);
  const tcp = Buffer.alloc(20);
  tcp.writeUInt16BE(sport, 0);
  tcp.writeUInt16BE(dport, 2);
  tcp.writeUInt32BE(seq, 4);
  tcp.writeUInt32BE(ack, 8);
  tcp[12] = 0x50;
  tcp[13] = flags;
  tcp.writeUInt16BE(64240, 14);
  return Buffer.concat([eth, ip, tcp, data]);
}

function pcap(frames: Buffer[], usec0: number): Buffer {
  const header = Buffer.from('d4c3b2a1020004000000000000000000ffff000001000000', 'hex');
  const records = frames.map((f, i) => {
    const r = Buffer.alloc(16);
    r.writeUInt32LE(1_700_000_000, 0);
    r.writeUInt32LE(usec0 + 10 * i, 4);
    r.writeUInt32LE(f.length, 8);
    r.writeUInt32LE(f.length, 12);
    return Buffer.concat([r, f]);
  });
  return Buffer.concat([header, ...records]);
}

const get = Buffer.from('GET /x HTTP/1.1\r\nHost: s\r\n\r\n');
const exchange = (server: string, port: number): Buffer[] => [
  frame(CLIENT, server, 40000, port, 1000, 0x02),
  frame(server, CLIENT, port, 40000, 5000, 0x12, 1001),
  frame(CLIENT, server, 40000, port, 1001, 0x18, 5001, get),
];

void t.test('analyze: an IPv6 --client or --dst typed another way finds the request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-address-args-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const decap = join(dir, 'decap.pcap');
  const backend = join(dir, 'backend.pcap');
  writeFileSync(decap, pcap(exchange(SERVICE, 80), 0));
  writeFileSync(backend, pcap(exchange(BACKEND, 8080), 30));
  const points = ['--point', `decap=${decap}`, '--point', `backend=${backend}`, '--json'];
  for (const flags of [
    ['--client', '2001:db8::1'],
    ['--client', '2001:DB8::1'],
    ['--client', '2001:db8:0:0:0:0:0:1'],
    ['--dst', '[2001:DB8::10]:80'],
    ['--dst', '2001:0db8:0:0::0010'],
  ]) {
    const lines: string[] = [];
    const code = await runAnalyze([...points, ...flags], (l) => lines.push(l));
    const out = JSON.parse(lines.join('\n')) as { verdict: { layer: string; reason?: string } };
    t.equal(out.verdict.layer, 'preserved', `${flags.join(' ')}: ${out.verdict.reason ?? ''}`);
    t.equal(code, 0, `${flags.join(' ')}: exit 0`);
  }
});
