/**
 * Mutated Envelope frames at the collector (mutate.ts). Connections authenticated with the token
 * and a valid hello each send runs of mutated frames. Each frame is first decoded here with the
 * collector's own decoder (common/envelope.ts) to foresee what the hub does with it: frames it
 * goes on from are sent in a run (up to 64) closed by a probe — a valid status with a seq of its
 * own — whose ack proves every frame of the run read and passed; a frame the hub must refuse
 * (undecodable, a kind an agent must not send, no seq, another agent's hello) goes last, after the
 * probe's ack, and the close that follows proves it read. So every frame counted was read by the
 * collector; a refusal the decoder here did not foresee is counted apart, its run uncounted; no
 * answer within 10 s is a hang. Measured: frames read, crashes (the process gone), hangs, the
 * collector's RSS from start to end; afterwards a restart on its data directory must load it as
 * it is (agents.json not quarantined).
 */
import WebSocket from 'ws';
import {
  AGENT_KINDS,
  decodeEnvelope,
  encodeEnvelope,
  isSpooledKind,
  refusedEnvelopeOf,
} from '../../common/envelope';
import type { Hello } from '../../common/wire';
import { agentIdProblem, nodeNameProblem } from '../../common/agent-names';
import { helloTooLarge } from '../../common/hello-limits';
import { LiveCollector } from '../../lab/live-collector';
import { fmt, median } from '../proc';
import { corpus, mutatedFrame, xorshift } from './mutate';
import { sampleCollector, type Samples } from './sampler';
import { withTmpfs } from './tmpfs';
import { row, type Ctx, type ScenarioOut } from './types';

const SLOTS = 16;
const SEED = 20_261_202;
const ANSWER_MS = 10_000;
const RUN = 64;

interface Tally {
  read: number;
  accepted: number;
  /** Of them: well-formed frames of a body kind the hub does not know, which it ignores. */
  unknownKinds: number;
  refused: Map<number, number>;
  /** Refusals the local decoder did not foresee (their run is not counted as read). */
  unforeseen: Map<number, number>;
  hangs: number;
  connections: number;
  /** The first hangs: [where it hung, what had been sent]. */
  hangRuns: [string, string][];
}

/** A hello the hub refuses for what it says: its names (AGENT_BAD_NAME) or its size (HELLO_TOO_LARGE). */
function helloRefused(h: Hello): boolean {
  return (
    agentIdProblem(h.agentId) !== null ||
    nodeNameProblem(h.node) !== null ||
    helloTooLarge(h) !== null
  );
}

/**
 * What the hub does with a frame, as foreseen from its decoding: go on (with the seq of a spooled
 * frame, else 0), or refuse it. A well-formed Envelope of a body kind the hub does not know (a
 * newer agent's) is ignored and, spooled, acknowledged: the hub goes on.
 */
function foresee(bytes: Uint8Array, agentId: string): { on: boolean; seq: number; unknown?: true } {
  let env;
  try {
    // As the hub gets it from ws: a Buffer (protobufjs reads Buffers and Uint8Arrays apart).
    env = decodeEnvelope(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (e) {
    const unknown = refusedEnvelopeOf(e);
    if (unknown?.unknownField !== undefined)
      return { on: true, seq: unknown.seq ?? 0, unknown: true };
    return { on: false, seq: 0 };
  }
  if (!AGENT_KINDS.includes(env.kind)) return { on: false, seq: 0 };
  if (env.kind === 'hello')
    return { on: env.hello.agentId === agentId && !helloRefused(env.hello), seq: 0 };
  if (!isSpooledKind(env.kind)) return { on: true, seq: 0 };
  return { on: env.seq > 0, seq: env.seq };
}

/** An encoded Envelope without its seq (field 1, written first when present). */
function withoutSeq(bytes: Uint8Array): Uint8Array {
  if (bytes[0] !== 0x08) return bytes;
  let at = 1;
  while (((bytes[at] ?? 0) & 0x80) !== 0) at++;
  return bytes.subarray(at + 1);
}

/** The probe: a status for a capture nobody has, `seq` in front of its pre-encoded body. */
function probeBytes(body: Uint8Array, seq: number): Uint8Array {
  const head = [0x08];
  for (let v = seq; ; v = Math.floor(v / 128)) {
    if (v < 128) {
      head.push(v);
      break;
    }
    head.push((v % 128) | 0x80);
  }
  const out = new Uint8Array(head.length + body.length);
  out.set(head, 0);
  out.set(body, head.length);
  return out;
}

type Outcome = { kind: 'acked' } | { kind: 'closed'; code: number } | { kind: 'hang' };

/** One connection's runs of frames until a frame is refused (or `more()` says stop). */
async function connection(
  c: LiveCollector,
  agentId: string,
  rand: () => number,
  frames: readonly Uint8Array[],
  probeBody: Uint8Array,
  nextProbe: () => number,
  more: () => boolean,
  t: Tally,
  highest: { seq: number },
): Promise<void> {
  const ws = new WebSocket(c.agentsUrl, {
    headers: { Authorization: `Bearer ${c.token}` },
    perMessageDeflate: false,
  });
  t.connections++;
  let waiting: { ack: Uint8Array; done: (o: Outcome) => void } | undefined;
  let closed: number | undefined;
  ws.on('error', () => undefined);
  ws.on('message', (data: Buffer) => {
    // The probe's ack, byte for byte (decoding every ack of a run would be most of our work).
    if (waiting !== undefined && data.equals(waiting.ack)) waiting.done({ kind: 'acked' });
  });
  ws.on('close', (code) => {
    closed = code;
    waiting?.done({ kind: 'closed', code });
  });
  /** The ack of probe `seq`, or the close, or a hang; with seq 0: only the close. */
  const answer = (seq: number): Promise<Outcome> =>
    new Promise((resolve) => {
      if (closed !== undefined) {
        resolve({ kind: 'closed', code: closed });
        return;
      }
      const timer = setTimeout(() => {
        resolve({ kind: 'hang' });
      }, ANSWER_MS);
      waiting = {
        ack: encodeEnvelope({ seq: 0, kind: 'ack', ack: { seq } }),
        done: (o) => {
          clearTimeout(timer);
          waiting = undefined;
          resolve(o);
        },
      };
    });
  const probe = (): Promise<Outcome> => {
    const seq = nextProbe();
    ws.send(probeBytes(probeBody, seq));
    return answer(seq);
  };
  try {
    const opened = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        resolve(false);
      }, ANSWER_MS);
      ws.once('open', () => {
        clearTimeout(timer);
        resolve(true);
      });
      ws.once('close', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!opened) {
      t.hangs++;
      if (t.hangRuns.length < 3) t.hangRuns.push(['open', '']);
      return;
    }
    ws.send(
      encodeEnvelope({
        seq: 0,
        kind: 'hello',
        hello: {
          agentId,
          node: `${agentId}-node`,
          version: 'fuzz',
          nodeAddresses: [],
          namespaces: [],
          spoolFirstSeq: 0,
        },
      }),
    );
    // The hello's answer goes through the same chain as the probes': one probe waits for it.
    const helloed = await probe();
    if (helloed.kind !== 'acked') {
      t.hangs++;
      if (t.hangRuns.length < 3) t.hangRuns.push(['hello', JSON.stringify(helloed)]);
      return;
    }
    while (more()) {
      let sent = 0;
      let unknownKinds = 0;
      let last: Uint8Array | undefined;
      const runFrames: Uint8Array[] = [];
      while (sent < RUN) {
        const f = mutatedFrame(rand, frames);
        const fate = foresee(f, agentId);
        if (!fate.on) {
          last = f;
          break;
        }
        highest.seq = Math.max(highest.seq, fate.seq);
        if (fate.unknown === true) unknownKinds++;
        // Half the spooled frames get a seq above every one sent so far: a frame whose seq the
        // hub has stored already is acknowledged as a duplicate without reaching the sessions.
        const bytes = fate.seq > 0 && rand() < 0.5 ? probeBytes(withoutSeq(f), nextProbe()) : f;
        runFrames.push(bytes);
        ws.send(bytes);
        sent++;
      }
      const o = await probe();
      if (o.kind === 'hang') {
        t.hangs++;
        if (t.hangRuns.length < 3)
          t.hangRuns.push(['run', runFrames.map((b) => Buffer.from(b).toString('hex')).join(' ')]);
        return;
      }
      if (o.kind === 'closed') {
        t.unforeseen.set(o.code, (t.unforeseen.get(o.code) ?? 0) + 1);
        return;
      }
      t.read += sent;
      t.accepted += sent;
      t.unknownKinds += unknownKinds;
      if (last === undefined) continue;
      ws.send(last);
      const end = await answer(0);
      if (end.kind === 'hang') {
        t.hangs++;
        if (t.hangRuns.length < 3) t.hangRuns.push(['refusal', Buffer.from(last).toString('hex')]);
        return;
      }
      if (end.kind === 'closed') {
        t.read++;
        t.refused.set(end.code, (t.refused.get(end.code) ?? 0) + 1);
      }
      return;
    }
  } finally {
    ws.terminate();
  }
}

/** RSS growth from the early samples (after a warm-up tenth) to the last tenth, MiB. */
function growth(s: Samples): { early: number; late: number } {
  const rs = s.rss.map(([, r]) => r);
  const tenth = Math.max(1, Math.floor(rs.length / 10));
  return { early: median(rs.slice(tenth, 2 * tenth)), late: median(rs.slice(-tenth)) };
}

export async function scenarioFuzz(ctx: Ctx, out: ScenarioOut): Promise<void> {
  const target = ctx.fuzzFrames;
  const capS = ctx.fuzzSeconds;
  out.title = `${fmt(target)} mutated Envelope frames at the collector`;
  out.setup =
    `${SLOTS} authenticated connections with a valid hello each, sending ${fmt(target)} mutated frames in all ` +
    `(4 in 5 structure-aware, 1 in 5 byte-level; seed ${SEED}), one at a time, each followed by a probe ` +
    `whose ack or a close tells the frame's fate; at most ${capS} s; the data directory on ` +
    (ctx.root ? 'a 64 MiB tmpfs' : 'the temp dir (no root for a tmpfs: slower)');
  const run = async (dataDir: string | undefined): Promise<void> => {
    const c = await LiveCollector.start({
      allowSharedAgentToken: true,
      ...(dataDir === undefined ? {} : { dataDir }),
      logTailChars: 200_000,
    });
    try {
      const t: Tally = {
        read: 0,
        accepted: 0,
        unknownKinds: 0,
        refused: new Map(),
        unforeseen: new Map(),
        hangs: 0,
        connections: 0,
        hangRuns: [],
      };
      let crashes = 0;
      let probe = 1;
      const t0 = Date.now();
      const deadline = t0 + capS * 1000;
      const more = (): boolean => t.read < target && Date.now() < deadline;
      const sampler = sampleCollector(() => c.pid, 500);
      const probeBody = withoutSeq(
        encodeEnvelope({
          seq: 0,
          kind: 'status',
          status: {
            captureId: 'c-nobody-00000000',
            point: 'probe',
            state: 'capturing',
            packets: 0,
            kernelDrops: null,
            ifaceDrops: null,
            queueDrops: 0,
            errorCode: '',
            message: '',
            netns: '',
            netnsAddresses: [],
            iface: 'eth0',
            linkType: '',
          },
        }),
      );
      let lastLog = t0;
      await Promise.all(
        Array.from({ length: SLOTS }, async (_, slot) => {
          const rand = xorshift(SEED + slot);
          let generation = 0;
          let agentId = `fuzz-${slot}`;
          let frames = corpus(rand, agentId, 'c-fuzz-00000000', 400);
          const highest = { seq: 0 };
          while (more()) {
            if (highest.seq > 2 ** 40) {
              // A mutated seq near 2^53 makes every later frame of this agent a duplicate: a new one.
              generation++;
              agentId = `fuzz-${slot}-${generation}`;
              frames = corpus(rand, agentId, 'c-fuzz-00000000', 400);
              highest.seq = 0;
            }
            if (!c.running()) {
              crashes++;
              ctx.log(`fuzz: the collector died: ${c.logs().slice(-2000)}`);
              await c.restart();
            }
            await connection(c, agentId, rand, frames, probeBody, () => probe++, more, t, highest);
            if (Date.now() - lastLog > 10_000) {
              lastLog = Date.now();
              ctx.log(
                `fuzz: ${fmt(t.read)} frames read, ${fmt(t.read / ((Date.now() - t0) / 1000))} /s`,
              );
            }
          }
        }),
      );
      const elapsedS = (Date.now() - t0) / 1000;
      const alive = c.running();
      const samples = sampler.stop();
      const g = growth(samples);
      await c.stop();
      const quarantinedBefore = c
        .logs()
        .split('\n')
        .filter((l) => l.includes('quarantined')).length;
      await c.restart();
      const loadsAgain =
        c
          .logs()
          .split('\n')
          .filter((l) => l.includes('quarantined')).length === quarantinedBefore;
      const refused = [...t.refused].sort((a, b) => b[1] - a[1]);
      rows.push(
        row(
          'mutated frames the collector read (time, rate)',
          `${fmt(t.read)} in ${fmt(elapsedS, 0)} s (${fmt(t.read / elapsedS)} /s, ${fmt(t.connections)} connections)`,
          `${fmt(target)} (--fuzz-frames) within ${capS} s (--fuzz-seconds)`,
          t.read >= target,
        ),
      );
      if (t.read < target)
        notes.push(
          `The time cap ended the fuzz at ${fmt(t.read)} of ${fmt(target)} frames: at ${fmt(t.read / elapsedS)} ` +
            `frames/s on this machine, ${fmt(target)} take about ${fmt(target / (t.read / elapsedS) / 60, 0)} min ` +
            `(\`npm run reliability -- --only fuzz --fuzz-seconds ${Math.ceil((1.2 * target) / (t.read / elapsedS))}\`). ` +
            'Most of the cost is per connection: every refused frame costs one (WebSocket upgrade, hello), ' +
            'and the collector decodes a mutated frame in about 0.1–0.2 ms.',
        );
      rows.push(
        row(
          'accepted and went on (of them: of a body kind the hub ignores); refused and closed (by close code)',
          `${fmt(t.accepted)} (${fmt(t.unknownKinds)}); ${fmt(t.read - t.accepted)} (${refused.map(([code, n]) => `${code}: ${fmt(n)}`).join(', ')})`,
          '–',
          null,
        ),
      );
      const unforeseen = [...t.unforeseen].map(([code, n]) => `${code}: ${fmt(n)}`).join(', ');
      rows.push(
        row(
          'refusals the decoder did not foresee (their runs not counted)',
          unforeseen === '' ? '0' : unforeseen,
          '–',
          null,
        ),
      );
      rows.push(
        row(
          'collector crashes',
          `${crashes}${alive ? '' : ' (dead at the end)'}`,
          '0',
          crashes === 0 && alive,
        ),
      );
      rows.push(
        row(`hangs (no answer within ${ANSWER_MS / 1000} s)`, fmt(t.hangs), '0', t.hangs === 0),
      );
      rows.push(
        row(
          'collector RSS: after warm-up → last tenth of the run (peak)',
          `${fmt(g.early, 0)} → ${fmt(g.late, 0)} MiB (peak ${fmt(Math.max(...samples.rss.map(([, r]) => r)), 0)} MiB)`,
          'flat: within 10 % or 32 MiB',
          g.late - g.early <= Math.max(32, g.early * 0.1),
        ),
      );
      rows.push(
        row(
          'a restart on the data directory afterwards',
          loadsAgain ? 'loads it as it is' : 'moved a file aside',
          'loads it as it is',
          loadsAgain,
        ),
      );
      const handlerFailed = t.refused.get(1011) ?? 0;
      if (t.hangRuns.length > 0)
        notes.push(
          `Hangs, the first ones (stage, frame as hex): ${t.hangRuns
            .map(([where, what]) => `${where} ${what.slice(0, 200)}`)
            .join('; ')}.`,
        );
      if (handlerFailed > 0)
        notes.push(
          `${fmt(handlerFailed)} frames were decoded and then failed in the collector's handler (close 1011, ` +
            'HUB_HANDLER_FAILED): frames that pass the decoder but break the session code behind it.',
        );
    } finally {
      await c.close();
    }
  };
  const { rows, notes } = out;
  if (ctx.root) await withTmpfs('64m', (dir) => run(`${dir}/data`));
  else await run(undefined);
}
