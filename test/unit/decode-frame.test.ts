/**
 * Golden decodes of real frames (bytes copied from test/pcaps, expectations checked against
 * the tshark and tcpdump oracles there), plus the cheap fuzz: every prefix of every fixture decodes
 * without throwing, and a prefix that loses a layer says truncated.
 */
import t from 'tap';
import type { PacketKeys, Tuple, TunnelInfo } from '../../common/event';
import { decodeFrame } from '../../core/decode/frame';

interface Want {
  layers: string;
  inner: Tuple | null;
  outer: Tuple | null;
  tunnels: TunnelInfo[];
  related?: Tuple;
  keys?: Partial<PacketKeys>;
}

interface Fixture {
  name: string;
  linktype: number;
  hex: string[];
  want: Want;
}

const FIXTURES: Fixture[] = [
  // Ethernet[IPv4[UDP[VXLAN[Ethernet[IPv4[ICMP]]]]]]
  {
    name: 'tcpdump vxlan.pcap #1',
    linktype: 1,
    hex: [
      '00163e0871cf36dc851eb340080045000086d2c0400040115152c0a8cb01c0a8ca01b05d12b500720000080000000000',
      '640000308801000200163e37f604080045000054000040004001234fc0a8cb03c0a8cb050800f6f2050c0001fce29751',
      '00000000a6f8020000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233',
      '34353637',
    ],
    want: {
      layers: 'ethernet ipv4 udp vxlan ethernet ipv4 icmp',
      inner: { proto: 'icmp', ipProto: 1, src: '192.168.203.3', dst: '192.168.203.5' },
      outer: {
        proto: 'udp',
        ipProto: 17,
        src: '192.168.203.1',
        dst: '192.168.202.1',
        sport: 45149,
        dport: 4789,
      },
      tunnels: [{ kind: 'vxlan', id: 100 }],
    },
  },
  // Ethernet[IPv4[UDP[Geneve(40 bytes of options)[IPv4[TCP]]]]]
  {
    name: 'tcpdump geneve-gcp.pcap #1',
    linktype: 1,
    hex: [
      '4201c0a864034201c0a864fe0800450000740000400002112e27c0a864fec0a86403f5fe17c1006000000a0008000000',
      '000001320101800000d1013202040800000dc0a86402000000000000000001320302000000000000123445000028d944',
      '000040065837c0a86402c0a864010b591f902d5ade4078e9bfda50000200f5470000',
    ],
    want: {
      layers: 'ethernet ipv4 udp geneve ipv4 tcp',
      inner: {
        proto: 'tcp',
        ipProto: 6,
        src: '192.168.100.2',
        dst: '192.168.100.1',
        sport: 2905,
        dport: 8080,
      },
      outer: {
        proto: 'udp',
        ipProto: 17,
        src: '192.168.100.254',
        dst: '192.168.100.3',
        sport: 62974,
        dport: 6081,
      },
      tunnels: [{ kind: 'geneve', id: 0 }],
      keys: {
        ipId: 55620,
        tcpSeq: 760929856,
        tcpAck: 2028584922,
        tcpFlags: 0,
        tcpWindow: 512,
        payloadLength: 0,
      },
    },
  },
  // Ethernet[802.1Q[IPv6[IPv4[GREv1[PPP[IPv4[UDP[DNS]]]]]]]]
  {
    name: 'zeek gre-pptp.pcap #1',
    linktype: 1,
    hex: [
      'c500000082c400121ef2613d8100006486dd60000000008b04f62402f00000018e0100000000000055552607fcd00100',
      '230000000000b1082a6b4500008b8caf0000402f75fe100000c8c034a69a3081880b0067178000068fb100083a76ff03',
      '002145000063000040003c115667ac102c03080808089f400035004f2d23a62c01000001000000000000357871742d64',
      '65746563742d6d6f6465322d39373731326538382d313637612d343562392d393365652d393133313430653736363738',
      '00001c0001',
    ],
    want: {
      layers: 'ethernet vlan ipv6 ipv4 gre ppp ipv4 udp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: '172.16.44.3',
        dst: '8.8.8.8',
        sport: 40768,
        dport: 53,
      },
      outer: {
        proto: 'other',
        ipProto: 4,
        src: '2402:f000:1:8e01::5555',
        dst: '2607:fcd0:100:2300::b108:2a6b',
      },
      tunnels: [{ kind: '4in6' }, { kind: 'gre', id: 6016 }],
    },
  },
  // Ethernet[IPv4[GRE(S)[ERSPAN II[Ethernet[IPv4[ICMP]]]]]]
  {
    name: 'zeek erspanII.pcap #1',
    linktype: 1,
    hex: [
      '6400f1e201126400f1e2010108004500009600004000fe2f76330202020201010101100088be00000704101708640000',
      '00006400f1e103036400f1e1020208004500006408940000ff0185001700000217000003080057b50016000000000000',
      '00a825d7abcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcd',
      'abcdabcdabcdabcdabcdabcdabcdabcdabcdabcd',
    ],
    want: {
      layers: 'ethernet ipv4 gre erspan ethernet ipv4 icmp',
      inner: { proto: 'icmp', ipProto: 1, src: '23.0.0.2', dst: '23.0.0.3' },
      outer: { proto: 'gre', ipProto: 47, src: '2.2.2.2', dst: '1.1.1.1' },
      tunnels: [{ kind: 'gre' }, { kind: 'erspan', id: 100 }],
    },
  },
  // Ethernet[IPv4[UDP 4500[ESP]]]
  {
    name: 'tcpdump espudp1.pcap #1',
    linktype: 1,
    hex: [
      '100000646445100000646423080045000090a60e000040115008c0010217c001022d11941194007c0000123456780000',
      '0001a71a51de1cb929238c4cab9ef2550db76402c501a26729fc8e8f7a7e63aa4b54aa59f642177a2924cc238d43b4c2',
      '8d5191232bd1608e4f49c04726b61255c79a5efdc271510fc047bdd45b642c3b0f12b56e4d5149c662bc468f221a52cc',
      'a322ad5a3fe76ae333dac783be7e',
    ],
    want: {
      layers: 'ethernet ipv4 udp esp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: '192.1.2.23',
        dst: '192.1.2.45',
        sport: 4500,
        dport: 4500,
      },
      outer: {
        proto: 'udp',
        ipProto: 17,
        src: '192.1.2.23',
        dst: '192.1.2.45',
        sport: 4500,
        dport: 4500,
      },
      tunnels: [{ kind: 'esp', id: 0x12345678 }],
    },
  },
  // Ethernet[IPv4[IPv6[UDP]]]
  {
    name: 'zeek 6in4.pcap #1',
    linktype: 1,
    hex: [
      '0010db88d2efc8bcc896d2a00800450000480001000040296a79010203040506070860000000000c1140dead00000000',
      '0000000000000000beefcafe000000000000000000000000babe753032c8000c83d258585858',
    ],
    want: {
      layers: 'ethernet ipv4 ipv6 udp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: 'dead::beef',
        dst: 'cafe::babe',
        sport: 30000,
        dport: 13000,
      },
      outer: { proto: 'other', ipProto: 41, src: '1.2.3.4', dst: '5.6.7.8' },
      tunnels: [{ kind: '6in4' }],
      keys: { payloadLength: 4 },
    },
  },
  // Ethernet[IPv4[ICMP port unreachable[IPv4[UDP]]]]
  {
    name: 'zeek icmp-destunreach-udp.pcap #1',
    linktype: 1,
    hex: [
      '0019e3e75d23000bdb6358a60800450000b0281e000080018e77c0a80166c0a80101030303bb00000000450000a33711',
      '00004011bf81c0a80101c0a801660035e747008f76d298a4818000010001000400000673656375726503656434036e65',
      '740000010001c00c000100010000012c0004d05e140ec013000200010000012c000f05646e7330320665786f647573c0',
      '17c013000200010000012c000805646e733031c042c013000200010000012c000805646e733034c042c013000200c914',
      '6f2d',
    ],
    want: {
      layers: 'ethernet ipv4 icmp',
      inner: { proto: 'icmp', ipProto: 1, src: '192.168.1.102', dst: '192.168.1.1' },
      outer: null,
      tunnels: [],
      related: {
        proto: 'udp',
        ipProto: 17,
        src: '192.168.1.1',
        dst: '192.168.1.102',
        sport: 53,
        dport: 59207,
      },
    },
  },
  // LinuxSLL2[IPv4[TCP SYN(MSS, SACK-perm, TS, WScale)]]
  {
    name: 'suricata decode-sll2-01.pcap #1',
    linktype: 276,
    hex: [
      '080000000000000200010406aa763071b0e700004500003c45a94000400670b0c0a801fdc0a80115dc9e00508b0b4393',
      '00000000a002faf0d70c0000020405b40402080ac5be80530000000001030307',
    ],
    want: {
      layers: 'linux-sll2 ipv4 tcp',
      inner: {
        proto: 'tcp',
        ipProto: 6,
        src: '192.168.1.253',
        dst: '192.168.1.21',
        sport: 56478,
        dport: 80,
      },
      outer: null,
      tunnels: [],
      keys: {
        payloadLength: 0,
        ipId: 17833,
        tcpSeq: 2332771219,
        tcpAck: 0,
        tcpFlags: 2,
        tcpWindow: 64240,
        tsVal: 3317596243,
        tsEcr: 0,
      },
    },
  },
  // Null(AF 2, little-endian)[IPv4[UDP[DNS]]]
  {
    name: 'tcpdump dns-badcookie.pcap #1',
    linktype: 0,
    hex: [
      '0200000045000044000f0000401100007f0000017f000001d6aa00350030fe43f6ab0120000100000000000100000600',
      '01000029100000000000000c000a000836bf111fef2e0109',
    ],
    want: {
      layers: 'null ipv4 udp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: '127.0.0.1',
        dst: '127.0.0.1',
        sport: 54954,
        dport: 53,
      },
      outer: null,
      tunnels: [],
      keys: { payloadLength: 40, ipId: 15 },
    },
  },
  // Ethernet[IPv4[UDP 6635[MPLS[IPv4[ICMP]]]]]
  {
    name: 'tcpdump mpls-over-udp.pcap #1',
    linktype: 1,
    hex: [
      '529a00c84f88529a00825c62080045000074676f00004011e3fb0a640caa0a640d9de54b19eb006000000001513f4500',
      '0054676f40003f01c0220a03000a0a01000a08007643a6eb001094073f5e000000004588030000000000101112131415',
      '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637',
    ],
    want: {
      layers: 'ethernet ipv4 udp mpls ipv4 icmp',
      inner: { proto: 'icmp', ipProto: 1, src: '10.3.0.10', dst: '10.1.0.10' },
      outer: {
        proto: 'udp',
        ipProto: 17,
        src: '10.100.12.170',
        dst: '10.100.13.157',
        sport: 58699,
        dport: 6635,
      },
      tunnels: [{ kind: 'mpls-udp', id: 21 }],
    },
  },
  // Ethernet[IPv4[UDP 4790[VXLAN-GPE[NSH[IPv4[UDP]]]]]]
  {
    name: 'tcpdump nsh-over-vxlan-gpe.pcap #1',
    linktype: 1,
    hex: [
      '00000000000000000000000008004500005c402340004011fc6b7f0000017f00000112b612b6004849f70c000004ffff',
      'ff0030060201ffffffff0001020112345678000203011234567845000020d4310000ff116647c0a80001c0a800022710',
      '4e20000c217874657374',
    ],
    want: {
      layers: 'ethernet ipv4 udp vxlan-gpe nsh ipv4 udp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: '192.168.0.1',
        dst: '192.168.0.2',
        sport: 10000,
        dport: 20000,
      },
      outer: {
        proto: 'udp',
        ipProto: 17,
        src: '127.0.0.1',
        dst: '127.0.0.1',
        sport: 4790,
        dport: 4790,
      },
      tunnels: [{ kind: 'vxlan-gpe', id: 0xffffff }],
      keys: { payloadLength: 4 },
    },
  },
  // Ethernet[IPv4[SCTP]]
  {
    name: 'zeek communityid-sctp.pcap #1',
    linktype: 1,
    hex: [
      '00600845e45500e018b10cad0800451000400000400040846498c0a8aa08c0a8aa3800070007000000003761a7460100',
      '0020432325440000ffff001100115cfe379fc0000004000c000600050000',
    ],
    want: {
      layers: 'ethernet ipv4 sctp',
      inner: {
        proto: 'sctp',
        ipProto: 132,
        src: '192.168.170.8',
        dst: '192.168.170.56',
        sport: 7,
        dport: 7,
      },
      outer: null,
      tunnels: [],
    },
  },
  // Ethernet[802.1Q[802.1Q[IPv4[TCP SYN]]]]
  {
    name: 'zeek http-qinq-0.pcap #1',
    linktype: 1,
    hex: [
      '0010db88d2efc8bcc896d2a08100b0008100b000080045000040df8e400040066dd38d8ee405c096bb2be9d00050fe21',
      '323a00000000b002ffff3bc00000020405b4010303040101080a164add200000000004020000',
    ],
    want: {
      layers: 'ethernet vlan vlan ipv4 tcp',
      inner: {
        proto: 'tcp',
        ipProto: 6,
        src: '141.142.228.5',
        dst: '192.150.187.43',
        sport: 59856,
        dport: 80,
      },
      outer: null,
      tunnels: [],
      keys: { tcpSeq: 4263588410, tcpFlags: 2, tsVal: 374005024, tsEcr: 0 },
    },
  },
  // Ethernet[IPv4[GRE 0x22eb[ERSPAN III[Ethernet[IPv4[ICMP]]]]]]
  {
    name: 'zeek erspanIII.pcap #1',
    linktype: 1,
    hex: [
      '005056eb85f400351af39d4408004500008afd3700003f2f6a0b0a0000010a000002100022eb03b3ed5c201400000000',
      '145800008030025056564452005056bed55d080045000054e1bc00003f01c813c0a80f2f010101010800097d01390000',
      '5c38854c000c20b608090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f',
      '3031323334353637',
    ],
    want: {
      layers: 'ethernet ipv4 gre erspan ethernet ipv4 icmp',
      inner: { proto: 'icmp', ipProto: 1, src: '192.168.15.47', dst: '1.1.1.1' },
      outer: { proto: 'gre', ipProto: 47, src: '10.0.0.1', dst: '10.0.0.2' },
      tunnels: [{ kind: 'gre' }, { kind: 'erspan', id: 0 }],
    },
  },
  // PPP[MPLS[IPv4[UDP]]]
  {
    name: 'tcpdump mpls-traceroute.pcap #1',
    linktype: 9,
    hex: [
      'ff0302811896010145000028a54c00000111f76f0c0404040c010101a54b829b00140000000000000000000000000000',
    ],
    want: {
      layers: 'ppp mpls ipv4 udp',
      inner: {
        proto: 'udp',
        ipProto: 17,
        src: '12.4.4.4',
        dst: '12.1.1.1',
        sport: 42315,
        dport: 33435,
      },
      outer: null,
      tunnels: [],
    },
  },
];

function bytesOf(f: Fixture): Uint8Array {
  return Uint8Array.from(Buffer.from(f.hex.join(''), 'hex'));
}

for (const f of FIXTURES) {
  void t.test(f.name, (t) => {
    const d = decodeFrame(f.linktype, bytesOf(f));
    t.equal(d.layers.map((l) => l.kind).join(' '), f.want.layers, 'layers');
    t.same(d.inner, f.want.inner, 'inner tuple');
    t.same(d.outer, f.want.outer, 'outer tuple');
    t.same(d.tunnels, f.want.tunnels, 'tunnels, outermost first');
    t.same(d.related, f.want.related, 'related (ICMP-quoted) tuple');
    if (f.want.keys !== undefined) t.match(d.keys, f.want.keys, 'keys');
    t.equal(d.truncated, false);
    t.equal(d.error, undefined);
    t.end();
  });
}

void t.test('every prefix decodes without throwing; losing a layer means truncated', (t) => {
  for (const f of FIXTURES) {
    const full = bytesOf(f);
    const n = decodeFrame(f.linktype, full).layers.length;
    let bad = 0;
    for (let k = 0; k < full.length; k++) {
      const d = decodeFrame(f.linktype, full.subarray(0, k));
      if (d.layers.length > n) bad++;
      if (d.layers.length < n && !d.truncated) {
        bad++;
        t.fail(`${f.name}: prefix ${k} has ${d.layers.length}/${n} layers but is not truncated`);
      }
      if (d.truncated && d.error !== 'DECODE_TRUNCATED') bad++;
    }
    t.equal(bad, 0, `${f.name}: ${full.length} prefixes`);
  }
  t.end();
});
