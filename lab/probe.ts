/**
 * The probe a scenario's client sends, in the scenario's request shape, each carrying the marker
 * `hoptrace-probe-<id>`: `http` curl `GET /hoptrace-probe-<id>` (3 s at most; an IPv6 target in
 * brackets); `http-keepalive` the same path on a keep-alive connection the lab client opened (and
 * warmed up) beforehand; `dns` an A query for `hoptrace-probe-<id>.lab.` over UDP (lab/lab-client.ts);
 * `icmp` one `ping` (ICMP echo, no marker: ping's pattern holds 16 bytes at most). A probe is
 * prepared before the captures start — only the keep-alive shape does something then: it opens
 * its connection, so no capture sees the handshake — and sent once every point captures.
 */
import type { ChildProcess } from 'node:child_process';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import { HoptraceError } from '../common/errors';
import { collect, stopChild, waitForLine } from './child';
import type { Netns } from './netns';
import type { RequestShape, Scenario } from './scenarios';
import { NS } from './topology';

/** dist/lab/lab-client.js, next to this file. */
const LAB_CLIENT = join(__dirname, 'lab-client.js');
/** The keep-alive client's warm-up and its probe each get this long once started. */
const CLIENT_STEP_MS = 10_000;

/** What the client got back. */
export interface ProbeResult {
  request: RequestShape;
  /** The client got its answer: HTTP 200 (keep-alive: on the warm-up's connection), for DNS a response with the query's id. */
  answered: boolean;
  /** One line for humans: what came back, or why nothing did. */
  summary: string;
  /** Exit code of curl or of the lab client (-1 when it could not run or was killed). */
  code: number;
  /** HTTP status code ('200'), null without an HTTP answer and for DNS. */
  httpCode: string | null;
  /** Keep-alive: the client's local port for the warm-up and for the probe (one connection). */
  localPorts?: { warmup: number | null; probe: number | null };
  /** DNS: the response's rcode, null without a response. */
  rcode?: number | null;
}

/** A probe ready to be sent; `close` releases what `prepareProbe` opened (safe after `send`). */
export interface PreparedProbe {
  send(): Promise<ProbeResult>;
  close(): Promise<void>;
}

/** Prepares the probe of `scenario` (keep-alive: connects and warms up; throws LAB_SETUP if that fails). */
export async function prepareProbe(
  lab: Netns,
  scenario: Scenario,
  probeId: string,
): Promise<PreparedProbe> {
  switch (scenario.request) {
    case 'http':
      return { send: () => curlProbe(lab, scenario, probeId), close: () => Promise.resolve() };
    case 'dns':
      return { send: () => dnsProbe(lab, scenario, probeId), close: () => Promise.resolve() };
    case 'http-keepalive':
      return keepaliveProbe(lab, scenario, probeId);
    case 'icmp':
      return { send: () => pingProbe(lab, scenario), close: () => Promise.resolve() };
  }
}

/** Prepares and sends the probe at once (when no capture must start in between); never throws on a failed request. */
export async function sendProbe(
  lab: Netns,
  scenario: Scenario,
  probeId: string,
): Promise<ProbeResult> {
  const probe = await prepareProbe(lab, scenario, probeId);
  try {
    return await probe.send();
  } finally {
    await probe.close();
  }
}

async function curlProbe(lab: Netns, scenario: Scenario, probeId: string): Promise<ProbeResult> {
  const { ip, port } = scenario.target;
  const host = isIPv6(ip) ? `[${ip}]` : ip;
  const pad = scenario.responseBytes;
  const url =
    `http://${host}:${port}/hoptrace-probe-${probeId}` + (pad === undefined ? '' : `?bytes=${pad}`);
  // -g: the brackets of an IPv6 literal are the address, not a curl URL glob.
  const res = await lab.execStatus(
    NS.client,
    'curl',
    // A padded answer is not kept (-o /dev/null): only its status line matters here.
    pad === undefined
      ? ['-s', '-g', '--noproxy', '*', '--max-time', '3', '-w', '\n%{http_code}', url]
      : [
          '-s',
          '-g',
          '--noproxy',
          '*',
          '--max-time',
          '10',
          '-o',
          '/dev/null',
          '-w',
          '\n%{http_code}',
          url,
        ],
    10_000,
  );
  const nl = res.stdout.lastIndexOf('\n');
  const code = nl >= 0 ? res.stdout.slice(nl + 1) : '000';
  const httpCode = code === '000' ? null : code;
  const answered = res.code === 0 && httpCode === '200';
  return {
    request: 'http',
    answered,
    summary: answered
      ? 'curl: HTTP 200'
      : `curl failed (exit ${res.code}${httpCode === null ? ', no HTTP answer' : `, HTTP ${httpCode}`})`,
    code: res.code,
    httpCode,
  };
}

/** One echo request, 2 s for the reply; answered when ping got it (exit 0). */
async function pingProbe(lab: Netns, scenario: Scenario): Promise<ProbeResult> {
  const res = await lab.execStatus(
    NS.client,
    'ping',
    ['-n', '-c', '1', '-W', '2', scenario.target.ip],
    CLIENT_STEP_MS,
  );
  const answered = res.code === 0;
  const line = res.stdout.split('\n').find((l) => l.includes('bytes from')) ?? '';
  return {
    request: 'icmp',
    answered,
    summary: answered ? `ping: ${line.trim()}` : `ping: no reply (exit ${res.code})`,
    code: res.code,
    httpCode: null,
  };
}

async function dnsProbe(lab: Netns, scenario: Scenario, probeId: string): Promise<ProbeResult> {
  const { ip, port } = scenario.target;
  const name = `hoptrace-probe-${probeId}.lab.`;
  const res = await lab.execStatus(
    NS.client,
    process.execPath,
    [LAB_CLIENT, 'dns', ip, String(port), name],
    CLIENT_STEP_MS,
  );
  const r = resultLine(res.stdout);
  const rcode = typeof r?.['rcode'] === 'number' ? r['rcode'] : null;
  const answers = typeof r?.['answers'] === 'number' ? r['answers'] : null;
  const answered = r?.['answered'] === true;
  return {
    request: 'dns',
    answered,
    summary: answered
      ? `DNS response rcode ${rcode ?? '?'}, ${answers ?? '?'} answer(s)`
      : `no DNS response (${clientError(r, res.stderr, res.code)})`,
    code: res.code,
    httpCode: null,
    rcode,
  };
}

async function keepaliveProbe(
  lab: Netns,
  scenario: Scenario,
  probeId: string,
): Promise<PreparedProbe> {
  const { ip, port } = scenario.target;
  const path = `/hoptrace-probe-${probeId}`;
  const child = lab.spawn(
    NS.client,
    process.execPath,
    [LAB_CLIENT, 'keepalive', ip, String(port), path],
    'pipe',
  );
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  const closed = new Promise<number>((resolve) =>
    child.once('close', (code) => {
      resolve(code ?? -1);
    }),
  );
  let warmup: number | null;
  try {
    const ready = JSON.parse(
      await waitForLine(
        child,
        child.stdout,
        /"event":"ready"/,
        `keep-alive warm-up (lab client in ${lab.full(NS.client)})`,
        CLIENT_STEP_MS,
      ),
    ) as Record<string, unknown>;
    warmup = typeof ready['localPort'] === 'number' ? ready['localPort'] : null;
  } catch (e) {
    await stopChild(child);
    if (e instanceof Error && stderr().trim() !== '') e.message += ` stderr: ${stderr().trim()}`;
    throw e;
  }
  return {
    async send(): Promise<ProbeResult> {
      if (child.stdin === null)
        throw new HoptraceError('LAB_SETUP', 'keep-alive client has no stdin', { where: 'lab' });
      child.stdin.end('go\n');
      const code = await exitWithin(child, closed, CLIENT_STEP_MS);
      const r = resultLine(stdout());
      const status = typeof r?.['status'] === 'number' ? r['status'] : null;
      const probe = typeof r?.['localPort'] === 'number' ? r['localPort'] : null;
      const answered = r?.['answered'] === true;
      return {
        request: 'http-keepalive',
        answered,
        summary: answered
          ? `HTTP 200 on the warm-up's connection (local port ${probe ?? '?'})`
          : status !== null
            ? `HTTP ${status} from local port ${probe ?? '?'} (warm-up from ${warmup ?? '?'})`
            : `no HTTP answer on the keep-alive connection (${clientError(r, stderr(), code)})`,
        code,
        httpCode: status === null ? null : String(status),
        localPorts: { warmup, probe },
      };
    },
    async close(): Promise<void> {
      await stopChild(child);
    },
  };
}

/** The exit code of `child` once its output is closed; SIGKILLed (-1) after `ms`. */
async function exitWithin(child: ChildProcess, closed: Promise<number>, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<number>((resolve) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve(-1);
    }, ms);
  });
  try {
    return await Promise.race([closed, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The lab client's last `{"event":"result",...}` line, or null. */
function resultLine(stdout: string): Record<string, unknown> | null {
  for (const line of stdout.split('\n').reverse()) {
    if (!line.includes('"event":"result"')) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (typeof v === 'object' && v !== null) return v as Record<string, unknown>;
    } catch {
      // not JSON
    }
  }
  return null;
}

/** Why the lab client got no answer: its own error, else its stderr, else its exit code. */
function clientError(r: Record<string, unknown> | null, stderr: string, code: number): string {
  if (typeof r?.['error'] === 'string') return r['error'];
  const err = stderr.trim().split('\n')[0] ?? '';
  return err !== '' ? err : `lab client exit ${code}`;
}
