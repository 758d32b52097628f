/*
 * DNS query header and first question (RFC 1035 §4.1.1, §4.1.2), on the UDP ports of the `dns`
 * table (53 and 5353 by default). Only queries (QR = 0) give keys: the transaction id, and a hash
 * of the first question (QNAME lowercased, QTYPE, QCLASS) — what a forwarder that re-sends the
 * question keeps while it picks a new id. Read best-effort over the captured bytes: a query cut
 * by the snaplen, or a name that uses compression, gives no question key and never marks the
 * frame truncated. No layer is added: the payload stays the UDP payload.
 *
 *  0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
 * +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
 * |                      ID                       |
 * +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
 * |QR|   Opcode  |AA|TC|RD|RA|   Z    |   RCODE   |
 * +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
 * |          QDCOUNT  |  ANCOUNT  |  NSCOUNT  |  ARCOUNT (16 bits each)
 * +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
 * |  QNAME (length-prefixed labels, 0) | QTYPE | QCLASS
 */
import { xxh32 } from './keys';
import type { DecodeState } from './reader';
import { Next } from './tables';

const MAX_NAME = 255;

export function decodeDNS(s: DecodeState): Next {
  const b = s.bytes;
  const at = s.off;
  const end = Math.min(s.len, s.ipWireEnd);
  if (at + 12 > end) return Next.None;
  const flags = ((b[at + 2] ?? 0) << 8) | (b[at + 3] ?? 0);
  if ((flags & 0x8000) !== 0) return Next.None; // a response
  s.dnsId = ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);
  const qdcount = ((b[at + 4] ?? 0) << 8) | (b[at + 5] ?? 0);
  if (qdcount === 0) return Next.None;
  // QNAME: labels up to the root label, lowercased into a small buffer, then QTYPE and QCLASS.
  const name: number[] = [];
  let i = at + 12;
  for (;;) {
    if (i >= end) return Next.None;
    const len = b[i] ?? 0;
    if (len === 0) break;
    if ((len & 0xc0) !== 0 || name.length + len + 1 > MAX_NAME || i + 1 + len > end)
      return Next.None;
    name.push(len);
    for (let k = 1; k <= len; k++) {
      const c = b[i + k] ?? 0;
      name.push(c >= 0x41 && c <= 0x5a ? c | 0x20 : c);
    }
    i += 1 + len;
  }
  if (i + 5 > end) return Next.None;
  for (let k = 0; k <= 4; k++) name.push(b[i + k] ?? 0); // the root label, QTYPE, QCLASS
  const q = Uint8Array.from(name);
  s.dnsQuestion = xxh32(q, 0, q.length);
  return Next.None;
}
