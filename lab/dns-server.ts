/**
 * The backend's DNS responder: a UDP socket in the backend pod namespace, bound to the address it
 * is given (never 0.0.0.0), that answers every A query with one A record, the responder's own
 * address (TTL 0), and other types with no answer. One JSON line on stdout per event:
 * {"event":"listening"} once bound, {"event":"query",src,sport,name,...} per query (the lab reads
 * the source the application saw from it, lab/run.ts backendObserved), {"event":"malformed"} for
 * a datagram that is not a DNS query (dropped).
 *
 * Usage: node dns-server.js --host 10.244.2.5 --port 5353
 */
import { createSocket } from 'node:dgram';
import { parseArgs } from 'node:util';
import {
  CLASS_IN,
  encodeResponse,
  parseMessage,
  RCODE_FORMERR,
  RCODE_NOERROR,
  RCODE_NOTIMP,
  TYPE_A,
  type DnsMessage,
} from './dns-wire';

/** The rcode and the A record to answer `q` with. */
function answerFor(q: DnsMessage, host: string): { rcode: number; ip: string | null } {
  if (q.opcode !== 0) return { rcode: RCODE_NOTIMP, ip: null };
  const [question] = q.questions;
  if (question === undefined || q.questions.length !== 1) return { rcode: RCODE_FORMERR, ip: null };
  const isA = question.qtype === TYPE_A && question.qclass === CLASS_IN;
  return { rcode: RCODE_NOERROR, ip: isA ? host : null };
}

function main(): void {
  const { values } = parseArgs({ options: { host: { type: 'string' }, port: { type: 'string' } } });
  const host = values.host;
  const port = Number(values.port);
  if (host === undefined || !Number.isInteger(port) || port <= 0 || port > 65535) {
    process.stderr.write('usage: dns-server --host IP --port N\n');
    process.exit(2);
  }
  const socket = createSocket('udp4');
  const log = (v: Record<string, unknown>): void => {
    process.stdout.write(JSON.stringify(v) + '\n');
  };
  socket.on('message', (msg, rinfo) => {
    const from = { src: rinfo.address, sport: rinfo.port };
    let q: DnsMessage;
    try {
      q = parseMessage(msg);
    } catch (e) {
      log({ event: 'malformed', ...from, bytes: msg.length, error: String(e) });
      return;
    }
    if (q.response) {
      log({ event: 'malformed', ...from, bytes: msg.length, error: 'a response, not a query' });
      return;
    }
    const { rcode, ip } = answerFor(q, host);
    log({
      event: 'query',
      ...from,
      id: q.id,
      name: q.questions[0]?.name ?? null,
      qtype: q.questions[0]?.qtype ?? null,
      rcode,
      answer: ip,
    });
    socket.send(encodeResponse(msg, q, rcode, ip), rinfo.port, rinfo.address);
  });
  socket.on('error', (e) => {
    process.stderr.write(`dns-server: ${e.message}\n`);
    process.exit(1);
  });
  socket.bind({ address: host, port }, () => {
    log({ event: 'listening', host, port, protocol: 'udp' });
  });
  const stop = (): void => {
    socket.close();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (require.main === module) main();
