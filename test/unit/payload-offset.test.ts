/**
 * payloadOffset (core/decode/frame.ts): where evidence.pcapng cuts a frame by default, right after
 * the innermost transport header. Frames built by frames.ts under structure comments.
 */
import t from 'tap';
import { payloadOffset } from '../../core/decode/frame';
import { eth, icmpEcho, ipv4, tcp, tcpHeader, udp, vxlan, wireguardData, type Seg } from './frames';

const SEG: Seg = {
  src: '10.90.0.42',
  dst: '10.96.0.10',
  sport: 40123,
  dport: 80,
  seq: 1000,
  ack: 2000,
  flags: 0x18,
  payload: 'GET / HTTP/1.1\r\n\r\n',
  // MSS, NOP, NOP, timestamps: 12 option bytes, a 32-byte header.
  options: [2, 4, 5, 180, 1, 1, 8, 10, 0, 0, 0, 1],
};

/** An IPv6 packet (next header `nh`) around `body`. */
function ipv6(nh: number, body: Buffer): Buffer {
  const h = Buffer.alloc(40);
  h[0] = 0x60;
  h.writeUInt16BE(body.length, 4);
  h[6] = nh;
  h[7] = 64;
  h[8] = 0xfd;
  h[24] = 0xfd;
  h[39] = 1;
  return Buffer.concat([h, body]);
}

void t.test('the end of the innermost transport header', (t) => {
  const cases: [string, number, Buffer, number | null][] = [
    // Ethernet[IPv4[TCP(12 option bytes)[HTTP]]]
    ['TCP with options', 1, tcp(0n, SEG).data, 14 + 20 + 32],
    // Ethernet[IPv4[TCP]] without payload: nothing to cut
    ['a bare SYN', 1, tcp(0n, { ...SEG, payload: '', flags: 0x02 }).data, 14 + 20 + 32],
    // Raw IP (tun0) [IPv4[TCP[HTTP]]]
    ['raw IP', 101, ipv4(6, SEG.src, SEG.dst, tcpHeader(SEG)), 20 + 32],
    // Ethernet[IPv6[TCP[HTTP]]]
    ['IPv6', 1, eth(0x86dd, ipv6(6, tcpHeader({ ...SEG, options: [] }))), 14 + 40 + 20],
    // Ethernet[IPv4[UDP[DNS]]]
    [
      'UDP',
      1,
      udp(0n, { ...SEG, sport: 5353, dport: 53, payload: Buffer.alloc(30, 1) }).data,
      14 + 20 + 8,
    ],
    // Ethernet[IPv4[ICMP echo[data]]]
    [
      'ICMP echo',
      1,
      icmpEcho(0n, { src: SEG.src, dst: SEG.dst, type: 8, id: 7, seq: 1, data: Buffer.alloc(56) })
        .data,
      14 + 20 + 8,
    ],
    // Ethernet[IPv4[UDP[VXLAN[Ethernet[IPv4[TCP[HTTP]]]]]]]: the inner TCP's end
    [
      'VXLAN',
      1,
      vxlan(0n, '192.168.50.1', 50000, '192.168.50.2', 1, tcp(0n, SEG)).data,
      14 + 20 + 8 + 8 + 14 + 20 + 32,
    ],
    // Ethernet[IPv4[UDP[WireGuard]]]: opaque, the outer UDP is the innermost transport
    [
      'WireGuard',
      1,
      wireguardData(0n, '192.168.50.1', 51820, '192.168.50.2', 51820, 64).data,
      14 + 20 + 8,
    ],
    // Ethernet[IPv4[TCP…]] cut by the snaplen inside the TCP options: the captured length
    ['TCP header cut', 1, tcp(0n, SEG).data.subarray(0, 14 + 20 + 24), 14 + 20 + 24],
    // Ethernet[ARP]: no IP packet
    ['ARP', 1, eth(0x0806, Buffer.alloc(28)), null],
    // An unknown link type
    ['link type 147', 147, tcp(0n, SEG).data, null],
  ];
  for (const [what, linktype, frame, want] of cases)
    t.equal(payloadOffset(linktype, frame), want, what);
  t.end();
});

void t.test('every prefix of a frame gives an offset within it, never a throw', (t) => {
  const frame = vxlan(0n, '192.168.50.1', 50000, '192.168.50.2', 1, tcp(0n, SEG)).data;
  for (let n = 0; n <= frame.length; n++) {
    const at = payloadOffset(1, frame.subarray(0, n));
    if (at !== null && (at < 0 || at > n)) t.fail(`prefix ${n}: offset ${at}`);
  }
  t.pass('all prefixes');
  t.end();
});
