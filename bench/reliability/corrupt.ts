/**
 * Corrupt files in the data directory: a data directory written by a real collector (a live
 * capture with stored events at two points, a finished capture with its reports) is copied, one
 * file of the copy damaged, and a collector started on it. Measured for each kind of damage:
 * the collector starts, and what it did with the damage — moved aside (quarantined), repaired
 * and counted, or read as absent — and whether its log names it. An event file's good records
 * must all still be loaded.
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LiveCollector } from '../../lab/live-collector';
import { fmt } from '../proc';
import { armStreams, connectFleet, drained, feed, makeFleet, startFleet } from './fleet';
import { JOURNEY_AGENTS, journeyCapture, sendJourneys } from './journeys';
import { readStoredEvents } from './readback';
import { row, type Ctx, type ScenarioOut } from './types';
import { waitUntil } from './wait';

interface Template {
  dir: string;
  liveId: string;
  finalId: string;
  /** Records in the live capture's events-p0.pb. */
  p0Events: number;
  /** Record boundaries of events-p0.pb (offsets of each record). */
  p0Offsets: number[];
}

interface Damage {
  file: (t: Template) => string;
  what: string;
  damage: (path: string, t: Template) => void;
  /** Events of p0 a collector should still load (undefined: the capture may be gone). */
  keeps?: (t: Template) => number;
}

const LOG_NAMES = [
  'not loaded from the data directory',
  'event file repaired',
  'is not valid; starting without it',
  'not a saved repro, skipped',
  'report-inputs.json is missing or damaged',
];

const write = (p: string, b: Buffer | string): void => {
  writeFileSync(p, b);
};
const mid = (t: Template): number => t.p0Offsets[Math.floor(t.p0Offsets.length / 2)] ?? 0;

const SESSION = (t: Template): string => join('captures', t.liveId, 'session.json');
const EVENTS = (t: Template): string => join('captures', t.liveId, 'events-p0.pb');

const DAMAGES: Damage[] = [
  {
    file: SESSION,
    what: 'cut in half',
    damage: (p) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, b.length >> 1));
    },
  },
  {
    file: SESSION,
    what: 'empty',
    damage: (p) => {
      write(p, '');
    },
  },
  {
    file: SESSION,
    what: 'valid JSON, a field of the wrong type',
    damage: (p) => {
      const rec = JSON.parse(readFileSync(p, 'utf8')) as { points: { events: unknown }[] };
      if (rec.points[0]) rec.points[0].events = 'many';
      write(p, JSON.stringify(rec));
    },
  },
  {
    file: SESSION,
    what: 'random bytes',
    damage: (p) => {
      write(p, randomBytes(700));
    },
  },
  {
    file: SESSION,
    what: 'a directory in its place',
    damage: (p) => {
      rmSync(p);
      mkdirSync(p);
    },
  },
  {
    file: () => 'agents.json',
    what: 'cut in half',
    damage: (p) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, b.length >> 1));
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: () => 'agents.json',
    what: 'a seq that is not a number',
    damage: (p) => {
      write(p, '{"corrupt-agent-0": "12"}\n');
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: () => 'collector.json',
    what: 'cut in half',
    damage: (p) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, b.length >> 1));
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: () => 'collector.json',
    what: 'an id that is not a string',
    damage: (p) => {
      write(p, '{"collectorId": 7}\n');
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: EVENTS,
    what: 'one byte of a record in the middle flipped',
    damage: (p, t) => {
      const b = readFileSync(p);
      const at = mid(t) + 12 + 3;
      b[at] = (b[at] ?? 0) ^ 0x40;
      write(p, b);
    },
    keeps: (t) => t.p0Events - 1,
  },
  {
    file: EVENTS,
    what: 'a length in the middle set to 2^32 - 1',
    damage: (p, t) => {
      const b = readFileSync(p);
      b.writeUInt32BE(0xffffffff, mid(t) + 4);
      write(p, b);
    },
    keeps: (t) => t.p0Events - 1,
  },
  {
    file: EVENTS,
    what: '1 KiB in the middle overwritten with random bytes',
    damage: (p, t) => {
      const b = readFileSync(p);
      randomBytes(1024).copy(b, mid(t) + 5);
      write(p, b);
    },
    keeps: (t) => {
      // The records the 1 KiB touches are lost; every other one is kept.
      const from = mid(t) + 5;
      const to = from + 1024;
      const ends = [...t.p0Offsets.slice(1), Infinity];
      return t.p0Offsets.filter((o, i) => (ends[i] ?? Infinity) <= from || o >= to).length;
    },
  },
  {
    file: EVENTS,
    what: 'the last record torn (cut 20 bytes short)',
    damage: (p) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, b.length - 20));
    },
    keeps: (t) => t.p0Events - 1,
  },
  {
    file: EVENTS,
    what: 'cut at a record boundary (its last 100 records gone)',
    damage: (p, t) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, t.p0Offsets[t.p0Offsets.length - 100] ?? 0));
    },
    keeps: (t) => t.p0Events - 100,
  },
  {
    file: EVENTS,
    what: '1 KiB of random bytes appended',
    damage: (p) => {
      write(p, Buffer.concat([readFileSync(p), randomBytes(1024)]));
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: EVENTS,
    what: 'all random bytes',
    damage: (p) => {
      write(p, randomBytes(readFileSync(p).length));
    },
    keeps: () => 0,
  },
  {
    file: EVENTS,
    what: 'empty',
    damage: (p) => {
      write(p, '');
    },
    keeps: () => 0,
  },
  {
    file: EVENTS,
    what: 'a directory in its place',
    damage: (p) => {
      rmSync(p);
      mkdirSync(p);
    },
  },
  {
    file: (t) => join('captures', t.finalId, 'report-inputs.json'),
    what: 'cut in half',
    damage: (p) => {
      const b = readFileSync(p);
      write(p, b.subarray(0, b.length >> 1));
    },
    keeps: (t) => t.p0Events,
  },
  {
    file: () => join('repros', 'r-bad-0000000a.json'),
    what: 'random bytes',
    damage: (p) => {
      mkdirSync(join(p, '..'), { recursive: true });
      write(p, randomBytes(300));
    },
    keeps: (t) => t.p0Events,
  },
];

/** Kinds of damage of the quick run: session.json, and two of an event file. */
const QUICK = [0, 9, 13];

/** A data directory as a real collector leaves it. */
async function buildTemplate(root: string, perPoint: number): Promise<Template> {
  const dir = join(root, 'template');
  const c = await LiveCollector.start({ allowSharedAgentToken: true, dataDir: dir });
  try {
    const streamFleet = await startFleet(c, 'corrupt', 2, { spoolLimit: 32 });
    const streams = await armStreams(c, streamFleet.agents);
    const f = feed(streams, Infinity, 100);
    await waitUntil(
      () => streams.every((s) => s.nextFrame > perPoint),
      60_000,
      `${perPoint} events at each point`,
    );
    f.stop();
    await drained(streamFleet.agents, 30_000);
    const journeyFleet = makeFleet(
      c,
      JOURNEY_AGENTS.map((a) => ({
        agentId: `corrupt-${a.role}`,
        node: `corrupt-${a.role}-node`,
        podIp: a.podIp,
      })),
    );
    for (const a of journeyFleet.agents) sendJourneys(a, 0);
    await connectFleet(journeyFleet);
    const fin = await c.createCapture(journeyCapture(1000, 20_000));
    await c.waitCapture(fin.id, (v) => v.finishedAt !== null, 'final', 30_000);
    await c.stop();
    streamFleet.close();
    journeyFleet.close();
    const liveId = streams[0]?.captureId ?? '';
    const b = readFileSync(join(dir, 'captures', liveId, 'events-p0.pb'));
    const offsets: number[] = [];
    // Event records only: each batch's mark record (magic "HTB1") holds no event.
    for (let at = 0; at + 12 <= b.length; at += 12 + b.readUInt32BE(at + 4))
      if (b.readUInt32BE(at) !== 0x48544231) offsets.push(at);
    return { dir, liveId, finalId: fin.id, p0Events: offsets.length, p0Offsets: offsets };
  } finally {
    await c.close();
  }
}

export async function scenarioCorrupt(ctx: Ctx, out: ScenarioOut): Promise<void> {
  const damages = ctx.quick ? QUICK.map((i) => DAMAGES[i]!) : DAMAGES;
  out.title = 'corrupt files in the data directory';
  const { rows, notes } = out;
  const root = mkdtempSync(join(tmpdir(), 'hoptrace-rel-corrupt-'));
  try {
    const t = await buildTemplate(root, ctx.quick ? 300 : 2000);
    const stored = readStoredEvents(t.dir);
    out.setup =
      `a data directory written by a real collector (a live capture with ${fmt(t.p0Events)} events at p0 and ` +
      `${fmt(stored.records - t.p0Events)} at p1, a finished capture with its reports), copied once per kind ` +
      `of damage (${damages.length}), one file of the copy damaged, a collector started on it`;
    let undercount: number | null = null;
    for (const [i, d] of damages.entries()) {
      const dir = join(root, `case-${i}`);
      cpSync(t.dir, dir, { recursive: true });
      const file = d.file(t);
      d.damage(join(dir, file), t);
      const t0 = Date.now();
      let c: LiveCollector | undefined;
      try {
        c = await LiveCollector.start({ allowSharedAgentToken: true, dataDir: dir });
      } catch (e) {
        rows.push(
          row(
            `${file}: ${d.what}`,
            `did not start: ${(e instanceof Error ? e.message : String(e)).slice(0, 300)}`,
            'starts; the damage moved aside or counted, and named',
            false,
          ),
        );
        continue;
      }
      try {
        const startMs = Date.now() - t0;
        const list = (await c.api('GET', '/v1/captures')) as {
          captures: { id: string; points: { name: string; events: number }[] }[];
        };
        const live = list.captures.find((v) => v.id === t.liveId);
        const p0 = live?.points.find((p) => p.name === 'p0')?.events;
        const named = c
          .logs()
          .split('\n')
          .filter((l) => LOG_NAMES.some((n) => l.includes(n)))
          .map((l) => (JSON.parse(l) as { msg?: string }).msg ?? l);
        if (
          d.what.startsWith('1 KiB in the middle') &&
          p0 !== undefined &&
          t.p0Events - p0 > 1 &&
          named.some((n) => n.includes(' 1 damaged runs'))
        )
          undercount = t.p0Events - p0;
        const want = d.keeps?.(t);
        const kept = want === undefined || p0 === want;
        const what =
          live === undefined
            ? 'the live capture not loaded'
            : `p0: ${fmt(p0)} of ${fmt(t.p0Events)} events loaded${want !== undefined && !kept ? ` (expected ${fmt(want)})` : ''}`;
        rows.push(
          row(
            `${file}: ${d.what}`,
            `started in ${fmt(startMs)} ms; ${what}; log: ${named.length === 0 ? 'nothing' : named.join(' / ').replace(new RegExp(root, 'g'), '…').slice(0, 260)}`,
            'starts; the damage moved aside or counted, and named',
            kept && named.length > 0,
          ),
        );
      } finally {
        await c.close();
      }
      ctx.log(`corrupt: ${file}: ${d.what} done`);
    }
    const failed = (re: RegExp): string[] =>
      rows.filter((r) => r.met === false && re.test(r.figure)).map((r) => r.measured);
    const silent = failed(/log: nothing/);
    if (silent.length > 0)
      notes.push(
        `Passed over in silence: ${silent.join('; ')}. An event file with fewer whole records than ` +
          "session.json counted is taken as the truth (collector/store.ts loadSessions sets the point's " +
          'events from the file) and nothing says that stored events went missing; a report-inputs.json ' +
          'that cannot be read is treated as absent (collector/sessions.ts start), so late final counts ' +
          "no longer rewrite that capture's reports, and nothing says why.",
      );
    const noStart = failed(/did not start/);
    if (noStart.length > 0)
      notes.push(
        `The collector does not start: ${noStart.join('; ')}. One event file that cannot be read ` +
          '(EISDIR here; EACCES or EIO alike) makes loadSessions throw STORE_IO for the whole data ' +
          'directory instead of quarantining that capture as a bad session.json is.',
      );
    if (undercount !== null)
      notes.push(
        'The log counts runs of damage, as it says, not records: 1 KiB overwritten in the ' +
          `middle of events-p0.pb cost ${undercount} events and is logged as 1 damaged run ` +
          '(collector/event-file.ts resync counts one per run it skips; the events loaded say how many are left).',
      );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
