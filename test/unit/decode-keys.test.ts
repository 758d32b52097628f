/**
 * Synthetic hex fixtures for the NAT-invariant keys, opaque tunnels, address formatting, options
 * ("Decode As") and the never-throw contract.
 */
import t from 'tap';
import { formatIPv6 } from '../../common/address';
import { decodeFrame } from '../../core/decode/frame';
import { findProbeMarker, fnv1a32, requestLineHash, xxh32 } from '../../core/decode/keys';
import type { PacketKeys } from '../../common/event';

const hex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
const ascii = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'latin1'));

// Ethernet[IPv4 id 0x1234[TCP PSH|ACK, NOP NOP TS(111, 222)[HTTP GET ... hoptrace-probe-abc123]]]
const HTTP_GET = hex(`
  020000000002020000000001 0800
  4500007312344000400600000a0000010a000002
  9c400050000003e8000007d0801801f600000000 0101080a0000006f000000de
  474554202f7820485454502f312e310d0a486f73743a20610d0a582d486f7074726163653a20686f7074
  726163652d70726f62652d6162633132330d0a0d0a`);

// Ethernet[IPv4[UDP 51820[WireGuard transport data, receiver 0xa1b2c3d4]]]
const WG_DATA = hex(`
  020000000002020000000001 0800
  4500003c1234400040110000c0a80001c0a80002
  ca6cca6c00280000
  04000000a1b2c3d4000000000000000000000000000000000000000000000000`);

// Ethernet[IPv4 total length 0 (TSO / BIG TCP)[TCP ACK[10 bytes]]]
const TSO = hex(`
  020000000002020000000001 0800
  4500000012344000400600000101010102020202
  00010002000000050000000650100064000000003031323334353637 3839`);

// Raw[IPv6 2001:db8::1 > ::ffff:192.0.2.1[ICMPv6 echo request]]
const V6_ECHO = hex(`
  60000000000c3a40 20010db8000000000000000000000001 00000000000000000000ffffc0000201
  800000000001000170696e67`);

void t.test(
  'TCP keys: seq/ack/flags/window, timestamps, payload length, hashes, probe marker',
  (t) => {
    const d = decodeFrame(1, HTTP_GET);
    const payload = HTTP_GET.subarray(14 + 20 + 32);
    t.same(d.inner, {
      proto: 'tcp',
      ipProto: 6,
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 40000,
      dport: 80,
    });
    t.equal(d.outer, null);
    t.match(d.keys, {
      ipId: 0x1234,
      tcpSeq: 1000,
      tcpAck: 2000,
      tcpFlags: 0x18,
      tcpWindow: 502,
      tsVal: 111,
      tsEcr: 222,
      payloadLength: payload.length,
      probeMarker: 'abc123',
    });
    t.equal(d.keys.payloadHash, xxh32(payload, 0, Math.min(64, payload.length)));
    // The request line without its HTTP version: a proxy that rewrites 1.1 to 1.0 still matches.
    t.equal(d.keys.requestLineHash, xxh32(ascii('GET /x'), 0, 6));
    const tcp = d.layers.find((l) => l.kind === 'tcp');
    t.match(tcp, { kind: 'tcp', tsVal: 111, tsEcr: 222 });
    t.end();
  },
);

void t.test('xxHash32, FNV-1a 32 and the request-line hash', (t) => {
  t.equal(fnv1a32(ascii(''), 0, 0), 0x811c9dc5);
  t.equal(fnv1a32(ascii('a'), 0, 1), 0xe40c292c);
  t.equal(fnv1a32(ascii('foobar'), 0, 6), 0xbf9cf968);
  // Published xxHash32 (seed 0) vectors: empty, short (< 4, < 16) and striped (>= 16) inputs.
  t.equal(xxh32(ascii(''), 0, 0), 0x02cc5d05);
  t.equal(xxh32(ascii('a'), 0, 1), 0x550d7456);
  t.equal(xxh32(ascii('abc'), 0, 3), 0x32d153ff);
  t.equal(xxh32(ascii('Nobody inspects the spammish repetition'), 0, 39), 0xe2293b2f);
  const framed = ascii('__abc__');
  t.equal(xxh32(framed, 2, 5), 0x32d153ff, 'a sub-range hashes like the bytes alone');
  const v10 = ascii('GET / HTTP/1.0\r\n');
  const v11 = ascii('GET / HTTP/1.1\r\nHost: x\r\n');
  const bare = ascii('GET /');
  t.equal(requestLineHash(v10, 0, v10.length), requestLineHash(v11, 0, v11.length));
  t.equal(requestLineHash(v10, 0, v10.length), xxh32(bare, 0, bare.length));
  const v2 = ascii('GET / HTTP/2.0\r\n');
  t.not(
    requestLineHash(v2, 0, v2.length),
    requestLineHash(v10, 0, v10.length),
    'only 1.0 / 1.1 are stripped',
  );
  const long = ascii('x'.repeat(300));
  t.equal(requestLineHash(long, 0, long.length), xxh32(long, 0, 128), 'line capped at 128 bytes');
  t.end();
});

void t.test('probe marker: [0-9a-z]{1,32}, first hit, none without an id', (t) => {
  const m = (s: string): string | undefined => {
    const b = ascii(s);
    return findProbeMarker(b, 0, b.length);
  };
  t.equal(m('xx hoptrace-probe-k3y9 yy'), 'k3y9');
  t.equal(m('hoptrace-probe-ABC'), undefined, 'uppercase is not an id');
  t.equal(m('hoptrace-probe-'), undefined);
  t.equal(m(`hoptrace-probe-${'a'.repeat(40)}`), 'a'.repeat(32));
  t.equal(m('hoptrace-probe hoptrace-probe-1 hoptrace-probe-2'), '1');
  t.end();
});

void t.test('WireGuard is opaque: message type and receiver index; outer = inner = UDP', (t) => {
  const d = decodeFrame(1, WG_DATA);
  t.same(d.tunnels, [{ kind: 'wireguard', id: 0xa1b2c3d4, messageType: 4 }]);
  t.same(d.inner, {
    proto: 'udp',
    ipProto: 17,
    src: '192.168.0.1',
    dst: '192.168.0.2',
    sport: 51820,
    dport: 51820,
  });
  t.same(d.outer, d.inner);
  // Not on a WireGuard port: plain UDP.
  const off = decodeFrame(1, WG_DATA, { wireguardPorts: [] });
  t.same(off.tunnels, []);
  t.equal(off.outer, null);
  t.end();
});

void t.test('IPv4 total length 0 (TSO/BIG TCP) uses the captured length', (t) => {
  const d = decodeFrame(1, TSO);
  t.equal(d.keys.payloadLength, 10);
  t.equal(d.truncated, false);
  t.equal(d.error, undefined);
  t.end();
});

void t.test('IPv6 addresses per RFC 5952', (t) => {
  const d = decodeFrame(101, V6_ECHO);
  t.same(d.inner, { proto: 'icmpv6', ipProto: 58, src: '2001:db8::1', dst: '::ffff:192.0.2.1' });
  t.equal(d.keys.payloadLength, 4);
  const f = (s: string): string => formatIPv6(hex(s), 0);
  t.equal(f('00000000000000000000000000000000'), '::');
  t.equal(f('00000000000000000000000000000001'), '::1');
  t.equal(f('20010db8000000010000000000000001'), '2001:db8:0:1::1', 'longest run compressed');
  t.equal(f('20010db8000000000001000000000001'), '2001:db8::1:0:0:1', 'first run on a tie');
  t.equal(
    f('20010db8000100000001000100010001'),
    '2001:db8:1:0:1:1:1:1',
    'a single zero group stays',
  );
  t.equal(f('FE800000000000000000000000000000'.toLowerCase()), 'fe80::');
  t.end();
});

void t.test('--vxlan-port style options remap UDP ports', (t) => {
  // Ethernet[IPv4[UDP 9999[VXLAN vni 7[Ethernet[ARP]]]]] : VXLAN only when 9999 is configured.
  const f = hex(`
    020000000002020000000001 0800
    4500004e0001000040110000c0a80001c0a80002
    d431270f003a0000
    0800000000000700
    ffffffffffff020000000001 0806 0001080006040001020000000001c0a80001000000000000c0a80002`);
  t.equal(
    decodeFrame(1, f)
      .layers.map((l) => l.kind)
      .join(' '),
    'ethernet ipv4 udp',
  );
  const d = decodeFrame(1, f, { vxlanPorts: [9999] });
  t.equal(d.layers.map((l) => l.kind).join(' '), 'ethernet ipv4 udp vxlan ethernet arp');
  t.same(d.tunnels, [{ kind: 'vxlan', id: 7 }]);
  // oracle convention: ARP has no IP, so inner is the innermost IP present (the outer UDP).
  t.same(d.inner, {
    proto: 'udp',
    ipProto: 17,
    src: '192.168.0.1',
    dst: '192.168.0.2',
    sport: 54321,
    dport: 9999,
  });
  t.end();
});

void t.test('malformed input ends with an error code, never a throw', (t) => {
  t.equal(decodeFrame(147, hex('00')).error, 'DECODE_UNSUPPORTED_LINKTYPE');
  t.equal(decodeFrame(101, hex('50000000')).error, 'DECODE_BAD_IP_VERSION');
  t.equal(
    decodeFrame(101, hex('4400001400000000400600000a0000010a000002')).error,
    'DECODE_BAD_IPV4_IHL',
  );
  t.equal(
    decodeFrame(101, hex('4500000a00000000400600000a0000010a000002')).error,
    'DECODE_BAD_IPV4_LENGTH',
  );
  // IPv4[TCP data offset 4]
  const badTcp = hex(
    '45000028000000004006 0000 0a000001 0a000002 0001000200000000000000004010000000000000',
  );
  t.equal(decodeFrame(101, badTcp).error, 'DECODE_BAD_TCP_OFFSET');
  // IPv4 in IPv4 forever: bounded by maxDepth.
  const loop = new Uint8Array(20 * 40);
  for (let i = 0; i < 40; i++) loop.set(hex('4500032000000000400400000a0000010a000002'), i * 20);
  t.equal(decodeFrame(101, loop).error, 'DECODE_TOO_DEEP');
  // Random bytes on every link type never throw.
  let seed = 1;
  const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 24;
  for (const lt of [0, 1, 9, 101, 108, 113, 228, 229, 276]) {
    for (let n = 0; n < 300; n++) {
      const b = new Uint8Array(rnd() % 120);
      for (let i = 0; i < b.length; i++) b[i] = rnd();
      decodeFrame(lt, b);
    }
  }
  t.pass('fuzzed frames decoded');
  t.end();
});

void t.test(
  'DNS keys: a query gives its id and question hash (name case folded); a response, a cut or compressed name do not',
  (t) => {
    const query = (id: number, name: string, flags = 0x0100): Buffer => {
      const h = Buffer.alloc(12);
      h.writeUInt16BE(id, 0);
      h.writeUInt16BE(flags, 2);
      h.writeUInt16BE(1, 4);
      const labels = name.split('.').filter((l) => l !== '');
      return Buffer.concat([
        h,
        ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')])),
        Buffer.from([0, 0, 1, 0, 1]),
      ]);
    };
    const frameOf = (payload: Buffer, dport = 53, snap?: number): PacketKeys => {
      const udp = Buffer.alloc(8);
      udp.writeUInt16BE(40000, 0);
      udp.writeUInt16BE(dport, 2);
      udp.writeUInt16BE(8 + payload.length, 4);
      const ip = Buffer.alloc(20);
      ip[0] = 0x45;
      ip.writeUInt16BE(28 + payload.length, 2);
      ip[8] = 64;
      ip[9] = 17;
      Buffer.from([10, 90, 0, 42]).copy(ip, 12);
      Buffer.from([10, 96, 0, 10]).copy(ip, 16);
      const bytes = Buffer.concat([ip, udp, payload]);
      const d = decodeFrame(101, snap === undefined ? bytes : bytes.subarray(0, snap));
      t.equal(
        d.truncated,
        snap !== undefined && snap < 28,
        'truncated only when the UDP header is cut',
      );
      return d.keys;
    };
    const a = frameOf(query(0x4242, 'www.Example.com.'));
    const b = frameOf(query(0x1111, 'WWW.example.COM.'), 5353);
    t.equal(a.dnsId, 0x4242);
    t.equal(b.dnsId, 0x1111);
    t.type(a.dnsQuestion, 'number');
    t.equal(a.dnsQuestion, b.dnsQuestion, 'names differing in case: the same question');
    t.not(frameOf(query(1, 'www.example.org.')).dnsQuestion, a.dnsQuestion, 'another name');
    t.equal(frameOf(query(7, 'x.lab.', 0x8180)).dnsId, undefined, 'a response gives no key');
    t.equal(frameOf(query(7, 'x.lab.'), 8053).dnsId, undefined, 'not a DNS port');
    const cut = frameOf(query(9, 'www.example.com.'), 53, 28 + 14);
    t.equal(cut.dnsId, 9, 'a cut query keeps its id');
    t.equal(cut.dnsQuestion, undefined, 'but has no question');
    const compressed = Buffer.concat(
      [query(5, 'a.')].map((q) =>
        Buffer.concat([q.subarray(0, 12), Buffer.from([0xc0, 12, 0, 1, 0, 1])]),
      ),
    );
    t.equal(frameOf(compressed).dnsQuestion, undefined, 'a compressed name gives no question');
    t.end();
  },
);
