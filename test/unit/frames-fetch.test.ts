/**
 * The collector's fetch of a point's evidence frames (collector/frames-fetch.ts) against agents
 * that answer in parts, not at all, or with what was not asked: every frame asked for ends up
 * either with its bytes or named missing with a reason, never invented, and the loop ends.
 */
import t from 'tap';
import { HoptraceError } from '../../common/errors';
import type { FrameRecord, FramesReply } from '../../common/wire';
import { fetchPointFrames, framesToFetch } from '../../collector/frames-fetch';
import type { AnalysisResult } from '../../core/report/analysis-result';

const CAPTURE = 'c-mhk2x-0a1b2c3d';

type Ask = { captureId: string; point: string; frames: number[]; release: boolean };

function rec(frame: number, bytes = 60): FrameRecord {
  return { frame, tsNs: BigInt(frame), origLen: bytes, data: Buffer.alloc(bytes, frame) };
}

function answer(q: Ask, o: Partial<FramesReply> = {}): FramesReply {
  return {
    requestId: 'q',
    captureId: q.captureId,
    point: q.point,
    linkType: 1,
    snaplen: 256,
    records: q.frames.map((f) => rec(f)),
    missing: [],
    retained: 1000,
    retentionDropped: 0,
    errorCode: '',
    message: '',
    ...o,
  };
}

/** A fake AgentRequests: `reply` answers each request; every request is recorded. */
function agent(reply: (q: Ask, n: number) => FramesReply | Error): {
  asked: Ask[];
  frames: (agentId: string, q: Ask) => Promise<FramesReply>;
} {
  const asked: Ask[] = [];
  return {
    asked,
    frames: (_agentId, q) => {
      asked.push(q);
      const r = reply(q, asked.length);
      return r instanceof Error ? Promise.reject(r) : Promise.resolve(r);
    },
  };
}

const now = (): number => 42;
const point = { name: 'decap', agentId: 'a1' };

void t.test('300 frames: two requests, the agent released by the last one only', async (t) => {
  const a = agent((q) => answer(q));
  const frames = Array.from({ length: 300 }, (_, i) => i + 1);
  const s = await fetchPointFrames(a, CAPTURE, point, frames, now);
  t.same(
    a.asked.map((q) => [q.frames.length, q.release]),
    [
      [256, false],
      [44, true],
    ],
  );
  t.same(
    s.records.map((r) => r.frame),
    frames,
  );
  t.same(s.missing, []);
  t.match(s, { linkType: 1, snaplen: 256, agentId: 'a1', fetchedUnixMs: 42 });
});

void t.test('an agent that answers in parts (its byte budget) is asked for the rest', async (t) => {
  const a = agent((q) => answer(q, { records: q.frames.slice(0, 2).map((f) => rec(f)) }));
  const s = await fetchPointFrames(a, CAPTURE, point, [5, 1, 3, 3, 9], now);
  t.same(
    a.asked.map((q) => q.frames),
    [
      [1, 3, 5, 9],
      [5, 9],
    ],
  );
  t.same(
    s.records.map((r) => r.frame),
    [1, 3, 5, 9],
  );
});

void t.test('missing frames keep the agent’s reason; nothing is made up', async (t) => {
  const a = agent((q) =>
    answer(q, {
      records: [rec(1)],
      missing: q.frames.filter((f) => f > 1).map((frame) => ({ frame, reason: 'RETENTION_FULL' })),
    }),
  );
  const s = await fetchPointFrames(a, CAPTURE, point, [1, 2, 3], now);
  t.same(
    s.records.map((r) => r.frame),
    [1],
  );
  t.same(s.missing, [
    { frame: 2, reason: 'RETENTION_FULL' },
    { frame: 3, reason: 'RETENTION_FULL' },
  ]);
});

void t.test('no agent, a gone agent, an agent that never answers', async (t) => {
  const none = await fetchPointFrames(
    agent(() => new Error('x')),
    CAPTURE,
    { name: 'decap', agentId: null },
    [1, 2],
    now,
  );
  t.same(
    none.missing.map((m) => m.reason),
    ['FRAMES_NO_AGENT', 'FRAMES_NO_AGENT'],
    'never armed',
  );
  const gone = agent(() => new HoptraceError('FRAMES_NO_AGENT', 'agent a1 is not connected'));
  const g = await fetchPointFrames(gone, CAPTURE, point, [1, 2], now);
  t.same(
    g.missing.map((m) => m.reason),
    ['FRAMES_NO_AGENT', 'FRAMES_NO_AGENT'],
  );
  t.equal(g.linkType, null, 'no link type is claimed');
  const silent = agent((q) => answer(q, { records: [], missing: [] }));
  const z = await fetchPointFrames(silent, CAPTURE, point, [1, 2], now);
  t.equal(silent.asked.length, 1, 'an agent answering nothing is not asked forever');
  t.same(
    z.missing.map((m) => m.reason),
    ['FRAMES_MALFORMED', 'FRAMES_MALFORMED'],
  );
});

void t.test(
  'a lying agent: what was not asked, twice, too long or of another capture',
  async (t) => {
    const a = agent((q, n) =>
      n === 1
        ? answer(q, {
            records: [rec(1), rec(1), rec(77), rec(2, 300)],
            missing: [
              { frame: 1, reason: 'RETENTION_CUT' },
              { frame: 88, reason: 'RETENTION_CUT' },
            ],
          })
        : answer(q, { linkType: 101, records: q.frames.map((f) => rec(f)) }),
    );
    const s = await fetchPointFrames(a, CAPTURE, point, [1, 2, 3], now);
    t.same(
      s.records.map((r) => [r.frame, r.data.length]),
      [[1, 60]],
      'frame 1 once; frame 77 was not asked for',
    );
    t.same(s.missing, [
      { frame: 2, reason: 'FRAMES_MALFORMED' }, // longer than the snaplen the agent gave
      { frame: 3, reason: 'FRAMES_MALFORMED' }, // a second reply with another link type
    ]);
    const other = agent((q) => answer(q, { captureId: 'c-other-00000000' }));
    const o = await fetchPointFrames(other, CAPTURE, point, [1], now);
    t.same(o.records, []);
    t.same(o.missing, [{ frame: 1, reason: 'FRAMES_MALFORMED' }], 'an answer for another capture');
  },
);

void t.test(
  'nothing to fetch: the agent is told to release; the frames of each point',
  async (t) => {
    const a = agent((q) => answer(q, { records: [] }));
    const s = await fetchPointFrames(a, CAPTURE, point, [], now);
    t.same(a.asked, [{ captureId: CAPTURE, point: 'decap', frames: [], release: true }]);
    t.same(s.records, []);
    const flow = (frame: number): AnalysisResult['points'][number]['flow'][number] =>
      ({ frame }) as AnalysisResult['points'][number]['flow'][number];
    const result = {
      points: [
        { name: 'decap', frame: 4, flow: [flow(4), flow(2), flow(9)] },
        { name: 'backend', frame: null, flow: [] },
        { name: 'egress', frame: 12, flow: [flow(1)] },
      ],
    } as unknown as AnalysisResult;
    t.same(
      [...framesToFetch(result)],
      [
        ['decap', [2, 4, 9]],
        ['backend', []],
        ['egress', [1, 12]],
      ],
      'the flow and the frame that proved the match, sorted, once',
    );
  },
);
