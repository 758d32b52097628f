import t from 'tap';
import { decodePacketEvent, encodePacketEvent } from '../../common/codec';
import type { PacketEvent } from '../../common/event';

void t.test('a PacketEvent survives the protobuf round trip exactly', (t) => {
  const ev: PacketEvent = {
    point: 'decap',
    node: 'vpn-node',
    iface: 'vxlan0',
    linktype: 'ethernet',
    tsNs: 1_764_452_477_123_456_789n, // beyond 2^53: must not lose the last digits
    frame: 7,
    outer: {
      proto: 'udp',
      ipProto: 17,
      src: '172.31.255.2',
      dst: '172.31.255.1',
      sport: 41000,
      dport: 4789,
    },
    inner: {
      proto: 'tcp',
      ipProto: 6,
      src: '10.90.0.42',
      dst: '10.244.2.5',
      sport: 51000,
      dport: 8080,
    },
    related: {
      proto: 'udp',
      ipProto: 17,
      src: '2001:db8::1',
      dst: '2001:db8::2',
      sport: 53,
      dport: 5353,
    },
    tunnels: [
      { kind: 'vxlan', id: 42 },
      { kind: 'wireguard', id: 0xdeadbeef, messageType: 4 },
    ],
    keys: {
      ipId: 0,
      tcpSeq: 4_263_588_410,
      tcpAck: 0,
      tcpFlags: 0x02,
      tcpWindow: 64240,
      tsVal: 374005024,
      tsEcr: 0,
      payloadLength: 0,
      probeMarker: 'abc123',
    },
    truncated: true,
    error: 'DECODE_TRUNCATED',
    wireLength: 124,
  };
  const back = decodePacketEvent(encodePacketEvent(ev));
  t.same(back, ev);
  t.equal(back.tsNs, ev.tsNs);
  t.end();
});

void t.test('optional fields stay absent, zero stays zero', (t) => {
  const ev: PacketEvent = {
    point: 'backend',
    node: 'n2',
    iface: 'any',
    linktype: 'linux-sll2',
    tsNs: 1n,
    frame: 1,
    outer: null,
    inner: null,
    tunnels: [],
    keys: { payloadLength: 0 },
    truncated: false,
    wireLength: 60,
  };
  const back = decodePacketEvent(encodePacketEvent(ev));
  t.same(back, ev);
  t.notOk('error' in back);
  t.notOk('related' in back);
  t.end();
});
