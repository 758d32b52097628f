/**
 * The few DNS messages the lab exchanges (RFC 1035 §4), shared by the responder
 * (lab/dns-server.ts) and the client (lab/lab-client.ts): a query with one question, and its
 * response (the question copied, zero or one A record). Names are absolute (`a.b.`), without
 * compression in the question section, which is all a query carries.
 */

export const TYPE_A = 1;
export const CLASS_IN = 1;
export const RCODE_NOERROR = 0;
export const RCODE_FORMERR = 1;
export const RCODE_NOTIMP = 4;

const HEADER_BYTES = 12;
const FLAG_QR = 0x8000;
const FLAG_AA = 0x0400;
const FLAG_RD = 0x0100;
const OPCODE_MASK = 0x7800;

/** One entry of the question section. */
export interface DnsQuestion {
  /** Absolute, lower case as sent: `hoptrace-probe-abc.lab.` */
  name: string;
  qtype: number;
  qclass: number;
}

/** The header and the question section of a message. */
export interface DnsMessage {
  id: number;
  /** A response (QR=1), not a query. */
  response: boolean;
  opcode: number;
  rcode: number;
  questions: DnsQuestion[];
  /** ANCOUNT as the header says. */
  answerCount: number;
  /** Offset just past the question section. */
  questionsEnd: number;
}

/** The wire form of absolute name `name` (`a.b.`); throws on an empty or oversized label. */
export function encodeName(name: string): Buffer {
  if (!name.endsWith('.')) throw new Error(`DNS name '${name}' is not absolute (no final dot)`);
  const labels = name === '.' ? [] : name.slice(0, -1).split('.');
  const parts: Buffer[] = [];
  for (const label of labels) {
    const b = Buffer.from(label, 'ascii');
    if (b.length === 0 || b.length > 63)
      throw new Error(`DNS name '${name}': label '${label}' is not 1..63 bytes`);
    parts.push(Buffer.from([b.length]), b);
  }
  parts.push(Buffer.from([0]));
  const out = Buffer.concat(parts);
  if (out.length > 255) throw new Error(`DNS name '${name}' is longer than 255 bytes`);
  return out;
}

/** A standard query (RD=1) for the A record of `name`. */
export function encodeQuery(id: number, name: string): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(FLAG_RD, 2);
  header.writeUInt16BE(1, 4);
  const tail = Buffer.alloc(4);
  tail.writeUInt16BE(TYPE_A, 0);
  tail.writeUInt16BE(CLASS_IN, 2);
  return Buffer.concat([header, encodeName(name), tail]);
}

/** Parses the header and questions of `b`; throws naming what is malformed. */
export function parseMessage(b: Buffer): DnsMessage {
  if (b.length < HEADER_BYTES) throw new Error(`${b.length} bytes, shorter than a DNS header`);
  const flags = b.readUInt16BE(2);
  const qdcount = b.readUInt16BE(4);
  let at = HEADER_BYTES;
  const questions: DnsQuestion[] = [];
  for (let q = 0; q < qdcount; q++) {
    const labels: string[] = [];
    for (;;) {
      const len = b[at];
      if (len === undefined) throw new Error(`question ${q + 1} runs past the message`);
      at++;
      if (len === 0) break;
      if (len > 63) throw new Error(`question ${q + 1}: label length byte ${len} (compressed?)`);
      if (at + len > b.length) throw new Error(`question ${q + 1} runs past the message`);
      labels.push(b.toString('ascii', at, at + len));
      at += len;
    }
    if (at + 4 > b.length) throw new Error(`question ${q + 1} has no type and class`);
    questions.push({
      name: `${labels.join('.')}.`,
      qtype: b.readUInt16BE(at),
      qclass: b.readUInt16BE(at + 2),
    });
    at += 4;
  }
  return {
    id: b.readUInt16BE(0),
    response: (flags & FLAG_QR) !== 0,
    opcode: (flags & OPCODE_MASK) >> 11,
    rcode: flags & 0x000f,
    questions,
    answerCount: b.readUInt16BE(6),
    questionsEnd: at,
  };
}

/**
 * The authoritative response to `query` (raw bytes, parsed as `q`): its id, opcode and RD bit,
 * its question section copied, `rcode`, and one A record `answerIp` (TTL 0) when given.
 */
export function encodeResponse(
  query: Buffer,
  q: DnsMessage,
  rcode: number,
  answerIp: string | null,
): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt16BE(q.id, 0);
  const rd = query.readUInt16BE(2) & FLAG_RD;
  header.writeUInt16BE(FLAG_QR | (q.opcode << 11) | FLAG_AA | rd | rcode, 2);
  header.writeUInt16BE(q.questions.length, 4);
  header.writeUInt16BE(answerIp === null ? 0 : 1, 6);
  const parts = [header, query.subarray(HEADER_BYTES, q.questionsEnd)];
  if (answerIp !== null) {
    const octets = answerIp.split('.').map(Number);
    if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255))
      throw new Error(`'${answerIp}' is not an IPv4 address`);
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc000 | HEADER_BYTES, 0); // the name: a pointer to the first question's
    rr.writeUInt16BE(TYPE_A, 2);
    rr.writeUInt16BE(CLASS_IN, 4);
    rr.writeUInt32BE(0, 6);
    rr.writeUInt16BE(4, 10);
    Buffer.from(octets).copy(rr, 12);
    parts.push(rr);
  }
  return Buffer.concat(parts);
}
