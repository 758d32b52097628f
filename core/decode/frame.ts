/**
 * decodeFrame: the pure decoder entry point. Link type picks the first decoder; each decoder reads
 * its header through the checked reader, records a layer and returns the next decoder from a
 * table. Never throws: truncation is a flag, malformed input ends the chain with an error code.
 */
import { decodeARP } from './arp';
import { decodeERSPAN2, decodeERSPAN3 } from './erspan';
import { decodeESP, decodeESPUDP } from './esp';
import { decodeEthernet } from './ethernet';
import { decodeGeneve } from './geneve';
import { decodeGRE } from './gre';
import { decodeICMP, decodeICMPv6 } from './icmp';
import { decodeIPv4 } from './ipv4';
import { decodeAH, decodeIPv6, decodeIPv6Ext, decodeIPv6Frag } from './ipv6';
import { buildKeys } from './keys';
import { decodeLLC } from './llc';
import { decodeMPLS, decodeMPLSUDP } from './mpls';
import { decodeNSH } from './nsh';
import { decodeLoop, decodeNull } from './null';
import { decodePPP } from './ppp';
import { decodeRaw } from './raw';
import { DecodeState } from './reader';
import { decodeSCTP } from './sctp';
import { decodeLinuxSLL, decodeLinuxSLL2 } from './sll';
import { Next, udpPortTable } from './tables';
import { decodeTCP } from './tcp';
import type { DecodedFrame, DecodeOptions } from './types';
import { decodeUDP } from './udp';
import { decodeVLAN } from './vlan';
import { decodeVXLAN } from './vxlan';
import { decodeVXLANGPE } from './vxlan-gpe';
import { decodeWireGuard } from './wireguard';
import { decodeDNS } from './dns';

export type { DecodedFrame, DecodeOptions, Layer, LayerKind } from './types';

type Decoder = (s: DecodeState) => Next;

/** Next → decode function. Indexed by the enum, so dispatch is one array load. */
const DECODERS: Decoder[] = new Array<Decoder>(Next.Count);
const REGISTRY: [Next, Decoder][] = [
  [Next.Ethernet, decodeEthernet],
  [Next.VLAN, decodeVLAN],
  [Next.LLC, decodeLLC],
  [Next.LinuxSLL, decodeLinuxSLL],
  [Next.LinuxSLL2, decodeLinuxSLL2],
  [Next.Null, decodeNull],
  [Next.Loop, decodeLoop],
  [Next.PPP, decodePPP],
  [Next.Raw, decodeRaw],
  [Next.MPLS, decodeMPLS],
  [Next.ARP, decodeARP],
  [Next.IPv4, decodeIPv4],
  [Next.IPv6, decodeIPv6],
  [Next.IPv6Ext, decodeIPv6Ext],
  [Next.IPv6Frag, decodeIPv6Frag],
  [Next.AH, decodeAH],
  [Next.TCP, decodeTCP],
  [Next.UDP, decodeUDP],
  [Next.SCTP, decodeSCTP],
  [Next.ICMP, decodeICMP],
  [Next.ICMPv6, decodeICMPv6],
  [Next.GRE, decodeGRE],
  [Next.ERSPAN2, decodeERSPAN2],
  [Next.ERSPAN3, decodeERSPAN3],
  [Next.VXLAN, decodeVXLAN],
  [Next.VXLANGPE, decodeVXLANGPE],
  [Next.NSH, decodeNSH],
  [Next.Geneve, decodeGeneve],
  [Next.MPLSUDP, decodeMPLSUDP],
  [Next.WireGuard, decodeWireGuard],
  [Next.ESP, decodeESP],
  [Next.ESPUDP, decodeESPUDP],
  [Next.DNS, decodeDNS],
];
for (const [n, d] of REGISTRY) DECODERS[n] = d;

/** Link-layer types (tcpdump.org LINKTYPE_* values) → name and first decoder. */
const LINKTYPES = new Map<number, { name: string; next: Next }>([
  [1, { name: 'ethernet', next: Next.Ethernet }],
  [113, { name: 'linux-sll', next: Next.LinuxSLL }],
  [276, { name: 'linux-sll2', next: Next.LinuxSLL2 }],
  [101, { name: 'raw', next: Next.Raw }],
  [12, { name: 'raw', next: Next.Raw }], // DLT_RAW on most BSDs
  [14, { name: 'raw', next: Next.Raw }], // DLT_RAW on OpenBSD
  // LINKTYPE_IPV4/IPV6 still go through the version nibble: tcpdump and tshark both decode an
  // IPv6 packet stored under LINKTYPE_IPV4 (tcpdump's LINKTYPE_IPV4_invalid test), and so do we.
  [228, { name: 'ipv4', next: Next.Raw }],
  [229, { name: 'ipv6', next: Next.Raw }],
  [0, { name: 'null', next: Next.Null }],
  [108, { name: 'loop', next: Next.Loop }],
  [9, { name: 'ppp', next: Next.PPP }],
]);

/**
 * The link type proper: the pcap/pcapng field keeps FCS information in its upper 16 bits
 * (LT_LINKTYPE in libpcap's pcap-common.h masks with 0xffff).
 */
export function linktypeOf(field: number): number {
  return field & 0xffff;
}

/** Link type name as used in events ('ethernet', 'linux-sll2', ... or 'other'). */
export function linktypeName(linktype: number): string {
  return LINKTYPES.get(linktypeOf(linktype))?.name ?? 'other';
}

const DEFAULT_MAX_DEPTH = 32;

function run(s: DecodeState, first: Next, maxDepth: number): void {
  let next = first;
  let depth = 0;
  while (next !== Next.None) {
    if (++depth > maxDepth) {
      s.fail('DECODE_TOO_DEEP');
      return;
    }
    const d = DECODERS[next];
    if (d === undefined) return;
    next = d(s);
  }
}

function result(s: DecodeState, linktype: string): DecodedFrame {
  const encapsulated = s.ipCount > 1 || s.tunnels.length > 0;
  const f: DecodedFrame = {
    linktype,
    layers: s.layers,
    outer: encapsulated ? s.firstIP : null,
    inner: s.lastIP,
    tunnels: s.tunnels,
    keys: buildKeys(s),
    truncated: s.truncated,
  };
  if (s.related !== undefined) f.related = s.related;
  if (s.error !== undefined) f.error = s.error;
  else if (s.truncated) f.error = 'DECODE_TRUNCATED';
  return f;
}

/** A frame run through the decoders for where its parts lie, or null (unknown link type, a throw). */
function decodedState(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): DecodeState | null {
  const lt = LINKTYPES.get(linktypeOf(linktype));
  if (lt === undefined) return null;
  const s = new DecodeState(bytes, udpPortTable(opts));
  try {
    run(s, lt.next, opts?.maxDepth ?? DEFAULT_MAX_DEPTH);
  } catch {
    return null;
  }
  return s;
}

/**
 * Where the innermost IP packet's payload starts in `bytes`: right after its transport header (TCP
 * with its options, UDP 8 bytes, ICMP and ICMPv6 8, SCTP's common header 12), or right after the
 * IP header when no transport the decoder reads follows (ESP, a fragment); at most the captured
 * length. Null when the frame holds no IP packet whose header was read. What evidence.pcapng
 * keeps of a frame by default (headers only). Never throws.
 */
export function payloadOffset(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): number | null {
  const s = decodedState(linktype, bytes, opts);
  // Each IP header starts its packet's payload afresh (DecodeState.beginIP), so this is the
  // innermost packet's: a tunnel's inner TCP, or the outer UDP of an opaque tunnel.
  if (s === null || s.lastIP === null || s.payOff < 0) return null;
  return Math.min(s.payOff, bytes.length);
}

/**
 * Where the innermost transport payload of a frame lies in its captured bytes (`[start, end)`),
 * or null when none of it was captured: what a reader of the payload's first bytes needs
 * (identity headers). `wireLength` is the payload's length as its IP header gives it, so a frame
 * cut by a snaplen shows as `end - start < wireLength`.
 */
export function framePayloadSpan(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): { start: number; end: number; wireLength: number } | null {
  const s = decodedState(linktype, bytes, opts);
  if (s === null) return null;
  const end = Math.min(s.payWireEnd, bytes.length);
  return s.payOff >= 0 && end > s.payOff
    ? { start: s.payOff, end, wireLength: s.payWireEnd - s.payOff }
    : null;
}

/** Decodes one captured frame of link type `linktype` (pcap/pcapng value). Never throws. */
export function decodeFrame(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): DecodedFrame {
  return decodeWithState(linktype, bytes, opts).frame;
}

/**
 * decodeFrame and payloadOffset of the same frame from one decode (a capture source that retains
 * headers only needs both for every frame).
 */
export function decodeFrameAndPayloadOffset(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): { frame: DecodedFrame; payloadOffset: number | null } {
  const { frame, s } = decodeWithState(linktype, bytes, opts);
  const off =
    s === null || s.lastIP === null || s.payOff < 0 ? null : Math.min(s.payOff, bytes.length);
  return { frame, payloadOffset: off };
}

function decodeWithState(
  linktype: number,
  bytes: Uint8Array,
  opts?: DecodeOptions,
): { frame: DecodedFrame; s: DecodeState | null } {
  const lt = LINKTYPES.get(linktypeOf(linktype));
  const s = new DecodeState(bytes, udpPortTable(opts));
  if (lt === undefined) {
    s.fail('DECODE_UNSUPPORTED_LINKTYPE');
    return { frame: result(s, 'other'), s: null };
  }
  let thrown = false;
  try {
    run(s, lt.next, opts?.maxDepth ?? DEFAULT_MAX_DEPTH);
  } catch {
    // Last resort only: every decoder is bounds-checked and none throws by design.
    s.fail('DECODE_INTERNAL');
    thrown = true;
  }
  return { frame: resultOf(s, lt.name), s: thrown ? null : s };
}

function resultOf(s: DecodeState, name: string): DecodedFrame {
  try {
    return result(s, name);
  } catch {
    return {
      linktype: name,
      layers: [],
      outer: null,
      inner: null,
      tunnels: [],
      keys: { payloadLength: 0 },
      truncated: s.truncated,
      error: 'DECODE_INTERNAL',
    };
  }
}
