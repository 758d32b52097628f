/**
 * The collector's replies as the CLI reads them (`hoptrace capture`, `doctor --collector`, cluster
 * `repro`, and `kubectl hoptrace` status, capture, doctor, repro): one reply kind per answer, each
 * naming only the members its commands read. CollectorClient.json takes one, so a reply of another
 * shape — `{}`, `[]`, a proxy's JSON error page, another server behind the port, a collector of
 * another version — is COLLECTOR_BAD_RESPONSE saying what is missing, never a TypeError or a wait
 * on a field that never comes.
 */
import {
  CAPTURE_ID_RE,
  REPRO_ID_RE,
  type AgentView,
  type CaptureView,
  type ReproView,
  type SessionState,
} from '../collector';
import { parseDoctorJson } from '../core/doctor/doctor-json';
import type { DoctorResult } from '../core/doctor/checks';
import type { AnalysisResult, OffsetStatus } from '../core/report/analysis-result';
import { LAYER_WORDS } from '../core/report/report';
import type { ProbeVerdict, ReproMark } from '../core/repro/repro-core';
import {
  bool,
  count,
  epochMs,
  kind,
  listOf,
  matching,
  nsDigits,
  nsTime,
  num,
  oneOf,
  optional,
  orNull,
  record,
  shaped,
  str,
  type Reply,
} from './reply-shapes';

// Each union spelled out once as a Record, so the compiler says when a member is added.
const SESSION_STATES: Record<SessionState, true> = {
  arming: true,
  capturing: true,
  resolved: true,
  timeout: true,
  cancelled: true,
  failed: true,
};
const OFFSET_STATUSES: Record<OffsetStatus, true> = {
  reference: true,
  'same-clock': true,
  bounded: true,
  'upper-bound': true,
  unbounded: true,
};
const PROBE_VERDICTS: Record<Exclude<ProbeVerdict, keyof typeof LAYER_WORDS>, true> = {
  'failed-to-connect': true,
  'not-captured': true,
};
const MARK_KINDS: Record<ReproMark['kind'], true> = {
  deleted: true,
  'replacement-ready': true,
  note: true,
};
const LAYERS = Object.keys(LAYER_WORDS);

/** What `kubectl hoptrace status` and `install` read of an agent in GET /v1/agents. */
export type AgentRow = Pick<AgentView, 'node' | 'connected'> & {
  version?: string | undefined;
  identity?: { method?: string | undefined } | undefined;
};

/** What `kubectl hoptrace status` reads of a capture in GET /v1/captures. */
export type CaptureRow = Pick<CaptureView, 'id' | 'state' | 'createdAt'> & {
  points: { name: string }[];
};

/** GET /v1/agents. */
export const AGENT_LIST: Reply<{ agents: AgentRow[] }> = shaped(
  'the agent list ({agents: [{node, connected, version?, identity?: {method?}}]})',
  record({
    agents: listOf(
      record({
        node: str,
        connected: bool,
        version: optional(str),
        identity: optional(record({ method: optional(str) })),
      }),
    ),
  }),
);

/** GET /v1/captures. */
export const CAPTURE_LIST: Reply<{ captures: CaptureRow[] }> = shaped(
  'the capture list ({captures: [{id, state, createdAt, points: [{name}]}]})',
  record({
    captures: listOf(
      record({ id: str, state: str, createdAt: str, points: listOf(record({ name: str })) }),
    ),
  }),
);

/** POST /v1/captures and GET /v1/captures/:id: what `hoptrace capture` prints and follows. */
export const CAPTURE_VIEW: Reply<CaptureView> = shaped(
  'a capture view ({id, state, points, progress, finalReason, reportUrls})',
  record({
    id: matching(CAPTURE_ID_RE, 'a capture id (c-…)'),
    state: oneOf(Object.keys(SESSION_STATES)),
    points: listOf(
      record({
        name: str,
        target: str,
        state: str,
        packets: count,
        kernelDrops: orNull(count),
        lost: count,
        queueDrops: count,
        error: optional(record({ code: str, message: str })),
        targetNote: optional(str),
      }),
    ),
    progress: record({ requestSeen: bool, layer: orNull(str) }),
    finalReason: orNull(str),
    reportUrls: orNull(record({ markdown: str, json: str })),
  }),
  // The report is fetched with the token: from this capture's own path, never another host.
  (v) => {
    const own = `/v1/captures/${v.id}/`;
    const u = v.reportUrls;
    if (u === null) return null;
    for (const [k, path] of Object.entries(u))
      if (!path.startsWith(own) || !/^[\w./-]+$/.test(path) || path.includes('..'))
        return `reportUrls.${k} '${path.slice(0, 80)}' is not a path under ${own}`;
    return null;
  },
);

/** `src:sport -> dst:dport` as the analysis writes an endpoint. */
const endpoint = record({ src: str, sport: num, dst: str, dport: num });
const pair = kind(
  'two point names',
  (v) => Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === 'string'),
);

/** report.json of a capture: what `hoptrace capture` prints of it (renderVerdictText). */
export const ANALYSIS: Reply<AnalysisResult> = shaped(
  "an analysis (report.json's verdict and points)",
  record({
    verdict: record({
      layer: oneOf(LAYERS),
      rewrittenBetween: orNull(pair),
      client: orNull(endpoint),
      evidence: listOf(record({ point: str, matchedBy: listOf(str) })),
      hint: str,
      reason: optional(str),
      shape: optional(str),
      hop: optional(record({ from: str, to: str })),
      before: optional(endpoint),
      after: optional(endpoint),
      node: optional(str),
      outer: optional(record({ class: str, detail: str })),
      conntrack: optional(record({ status: str, detail: str })),
      secondary: optional(listOf(record({ layer: str, detail: str }))),
    }),
    points: listOf(record({ name: str, observed: orNull(endpoint), firstTsNs: orNull(nsTime) })),
    caveats: optional(listOf(str)),
    hops: optional(listOf(record({ from: str, to: str, detail: str }))),
    clock: optional(
      listOf(
        record({
          point: str,
          node: orNull(str),
          reference: str,
          status: oneOf(Object.keys(OFFSET_STATUSES)),
          lowNs: orNull(nsDigits),
          highNs: orNull(nsDigits),
          detail: str,
        }),
      ),
    ),
    identityHeaders: optional(
      record({
        seen: listOf(record({ point: str, frame: num, kind: str, value: str })),
        headersOnly: optional(bool),
        cut: listOf(
          record({
            point: str,
            payloadBytes: count,
            payloadLength: count,
            segments: optional(count),
            why: str,
          }),
        ),
        continued: optional(
          listOf(record({ point: str, payloadBytes: count, segments: count, why: str })),
        ),
      }),
    ),
  }),
);

/** POST /v1/doctor: the report `hoptrace doctor` prints, its summary counted from its findings. */
export const DOCTOR_REPORT: Reply<DoctorResult> = {
  what: 'a doctor report ({tunnelRange, client, findings})',
  read(v) {
    const r = parseDoctorJson(v);
    return 'error' in r ? { why: r.error } : { value: r.result };
  },
};

const reproPoint = record({ name: str, state: str, error: optional(record({ code: str })) });

/** Every /v1/repros/:id call: what `hoptrace repro` prints and follows. */
export const REPRO_VIEW: Reply<ReproView> = shaped(
  'a repro view ({id, backend, attachments, marks, timeline, summary})',
  record({
    id: matching(REPRO_ID_RE, 'a repro id (r-…)'),
    backend: reproPoint,
    attachments: listOf(
      record({
        pod: record({ name: str, ip: str, node: str }),
        points: listOf(reproPoint),
      }),
    ),
    marks: listOf(record({ kind: oneOf(Object.keys(MARK_KINDS)), atMs: epochMs, detail: str })),
    timeline: listOf(
      record({
        probeId: str,
        startedAtMs: epochMs,
        servedBy: orNull(record({ name: str, ip: str })),
        verdict: oneOf([...LAYERS, ...Object.keys(PROBE_VERDICTS)]),
        ok: bool,
        backendSrc: orNull(str),
      }),
    ),
    summary: orNull(
      record({
        recovered: bool,
        deletedAtMs: orNull(num),
        brokenMs: orNull(num),
        brokenForAtLeastMs: orNull(num),
        why: str,
      }),
    ),
    lossText: optional(listOf(str)),
  }),
);
