/**
 * The lab's client for the request shapes curl cannot stage, run inside the client namespace
 * (lab/probe.ts). Prints one JSON line per event; exit 0 when the probe was answered, 1 when not,
 * 2 on a usage error.
 *
 *   dns IP PORT NAME        one A query for NAME from an ephemeral UDP port; waits up to 3 s for
 *                           a response carrying the query's id, then prints
 *                           {"event":"result","answered",rcode,answers,localPort,...}
 *   keepalive IP PORT PATH  opens ONE TCP connection, sends `GET /warmup` (HTTP/1.1, keep-alive)
 *                           and reads the whole response, prints {"event":"ready","localPort"},
 *                           waits for a line on stdin, sends `GET PATH` on the same connection,
 *                           prints {"event":"result","answered",status,localPort,warmupLocalPort}
 *                           and closes the connection.
 */
import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { encodeQuery, parseMessage } from './dns-wire';

const ANSWER_TIMEOUT_MS = 3000;

function print(v: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(v) + '\n');
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function dns(ip: string, port: number, name: string): Promise<number> {
  const id = randomInt(0, 0x10000);
  const query = encodeQuery(id, name);
  const socket = createSocket('udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    const localPort = socket.address().port;
    const result = await new Promise<Record<string, unknown>>((resolve) => {
      let ignored = 0;
      const timer = setTimeout(() => {
        resolve({
          answered: false,
          error: `no response with id ${id} within ${ANSWER_TIMEOUT_MS} ms`,
          ignored,
        });
      }, ANSWER_TIMEOUT_MS);
      const done = (v: Record<string, unknown>): void => {
        clearTimeout(timer);
        resolve(v);
      };
      socket.on('message', (msg) => {
        try {
          const m = parseMessage(msg);
          if (m.response && m.id === id) {
            done({ answered: true, rcode: m.rcode, answers: m.answerCount });
            return;
          }
        } catch {
          // not DNS: ignored like a response with another id
        }
        ignored++;
      });
      socket.on('error', (e) => {
        done({ answered: false, error: e.message });
      });
      socket.send(query, port, ip, (e) => {
        if (e !== null) done({ answered: false, error: `send: ${e.message}` });
      });
    });
    print({ event: 'result', request: 'dns', id, name, localPort, ...result });
    return result['answered'] === true ? 0 : 1;
  } finally {
    socket.close();
  }
}

/** Reads HTTP/1.1 responses off one socket, delimited by Content-Length or chunked encoding. */
class ResponseReader {
  private buf = Buffer.alloc(0);
  private closed: string | null = null;
  private wake: (() => void) | null = null;

  constructor(socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake?.();
    });
    socket.on('close', () => {
      this.closed = 'the server closed the connection';
      this.wake?.();
    });
    socket.on('error', (e) => {
      this.closed = e.message;
      this.wake?.();
    });
  }

  /** The connection ended before a response could be read, and why. */
  get endedBecause(): string | null {
    return this.closed;
  }

  /** The status of the next complete response; rejects on close or after `timeoutMs`. */
  async next(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = this.take();
      if (got !== null) return got;
      if (this.closed !== null) throw new Error(`${this.closed} before a complete response`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no complete response within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  // One complete response off the front of the buffer (its status), or null if not all there yet.
  private take(): number | null {
    const headEnd = this.buf.indexOf('\r\n\r\n');
    if (headEnd < 0) return null;
    const lines = this.buf.toString('latin1', 0, headEnd).split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
    if (status?.[1] === undefined) throw new Error(`not an HTTP response: '${lines[0] ?? ''}'`);
    const header = (name: string): string | undefined =>
      lines
        .slice(1)
        .find((l) => l.toLowerCase().startsWith(`${name}:`))
        ?.slice(name.length + 1)
        .trim();
    const length = header('content-length');
    let end: number | null;
    if (length !== undefined) {
      end = headEnd + 4 + Number(length);
      if (this.buf.length < end) end = null;
    } else if (header('transfer-encoding')?.toLowerCase() === 'chunked') {
      end = this.chunkedEnd(headEnd + 4);
    } else {
      throw new Error('a keep-alive response without Content-Length or chunked encoding');
    }
    if (end === null) return null;
    this.buf = this.buf.subarray(end);
    return Number(status[1]);
  }

  // Offset past the last chunk (no trailers) of a chunked body starting at `at`, or null.
  private chunkedEnd(at: number): number | null {
    for (;;) {
      const eol = this.buf.indexOf('\r\n', at);
      if (eol < 0) return null;
      const size = parseInt(this.buf.toString('latin1', at, eol), 16);
      if (!Number.isInteger(size)) throw new Error('a malformed chunk size');
      const next = eol + 2 + size + 2;
      if (this.buf.length < next) return null;
      if (size === 0) return next;
      at = next;
    }
  }
}

function get(path: string, host: string): string {
  return `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: hoptrace-lab-client\r\nConnection: keep-alive\r\n\r\n`;
}

/** Resolves on the next line of stdin; rejects when stdin ends first. */
function stdinLine(): Promise<void> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: process.stdin });
    rl.once('line', () => {
      resolve(); // before close(), which emits 'close' at once
      rl.close();
      process.stdin.destroy();
    });
    rl.once('close', () => {
      reject(new Error('stdin closed before the go line'));
    });
  });
}

async function keepalive(ip: string, port: number, path: string): Promise<number> {
  const host = `${ip}:${port}`;
  const socket = connect({ host: ip, port });
  const reader = new ResponseReader(socket);
  let stage = 'connect';
  let warmupLocalPort: number | null = null;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no connection within ${ANSWER_TIMEOUT_MS} ms`));
      }, ANSWER_TIMEOUT_MS);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    stage = 'warm-up';
    warmupLocalPort = socket.localPort ?? null;
    socket.write(get('/warmup', host));
    const warm = await reader.next(ANSWER_TIMEOUT_MS);
    print({ event: 'ready', localPort: warmupLocalPort, status: warm });
    stage = 'wait';
    await stdinLine();
    stage = 'probe';
    const idle = reader.endedBecause;
    if (idle !== null) throw new Error(`${idle} while it was idle`);
    socket.write(get(path, host));
    const status = await reader.next(ANSWER_TIMEOUT_MS);
    const localPort = socket.localPort ?? null;
    const answered = status === 200 && localPort === warmupLocalPort;
    print({
      event: 'result',
      request: 'http-keepalive',
      answered,
      status,
      localPort,
      warmupLocalPort,
    });
    return answered ? 0 : 1;
  } catch (e) {
    print({
      event: 'result',
      request: 'http-keepalive',
      answered: false,
      stage,
      error: message(e),
      warmupLocalPort,
    });
    return 1;
  } finally {
    socket.end();
  }
}

function usage(): number {
  process.stderr.write('usage: lab-client dns IP PORT NAME | keepalive IP PORT PATH\n');
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const [mode, ip, portText, arg] = argv;
  const port = Number(portText);
  if (ip === undefined || arg === undefined || !Number.isInteger(port) || port <= 0 || port > 65535)
    return usage();
  if (mode === 'dns') return dns(ip, port, arg);
  if (mode === 'keepalive') return keepalive(ip, port, arg);
  return usage();
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      print({ event: 'result', answered: false, error: message(e) });
      process.exitCode = 1;
    },
  );
}
