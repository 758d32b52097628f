/**
 * What the captures themselves missed, next to the verdict. A packet absent at a point proves
 * something only if that point's capture saw everything: when it lost packets (kernel ring full,
 * agent queue full, events lost on the way) or cannot count its drops at all (the `cap`
 * fallback; a classic pcap file), a missing request or reply may be one of them, and the report
 * must say so. Pure: the analysis and the agents' last statuses (or what the capture files
 * recorded) in, sentences out.
 */
import { replyPath } from '../attribute/reply-path';
import { replyPoints } from './reply-points';
import { countText } from '../../common/counters';
import type { AnalysisResult, CaptureHealth, PointSummary } from './analysis-result';

export type { CaptureHealth };

/** What the capture at one point lost (or why its counts mean nothing), as a phrase; null when none. */
export function lossPhrase(
  h: Pick<
    CaptureHealth,
    | 'confirmed'
    | 'state'
    | 'kernelDrops'
    | 'queueDrops'
    | 'lost'
    | 'file'
    | 'dropsGiven'
    | 'dropsPartial'
  > & {
    /** Events a repro's collector received and let go past its memory bound (never analysed). */
    unheld?: number;
  },
): string | null {
  if (!h.confirmed) return `never reported that it was capturing (state ${h.state})`;
  if (h.file !== undefined)
    return fileLossPhrase(h.file, h.kernelDrops, h.dropsGiven === true, h.dropsPartial);
  const parts: string[] = [];
  if (h.kernelDrops !== null && h.kernelDrops > 0)
    parts.push(`${countText(h.kernelDrops)} in the kernel`);
  if (h.queueDrops > 0) parts.push(`${countText(h.queueDrops)} in the agent`);
  if (h.lost > 0) parts.push(`${countText(h.lost)} events on the way to the collector`);
  if (h.unheld !== undefined && h.unheld > 0)
    parts.push(`${countText(h.unheld)} events in the collector (past its memory bound)`);
  if (parts.length > 0) return `lost ${parts.join(', ')}`;
  if (h.kernelDrops === null) return 'cannot count its kernel drops (the `cap` fallback source)';
  return null;
}

/** The interfaces of a file that recorded no drop count: "interface 1 (eth1) and 3 more". */
function unrecordedText(p: NonNullable<CaptureHealth['dropsPartial']>): string {
  const more = p.count - p.unrecorded.length;
  return p.unrecorded.join(', ') + (more > 0 ? ` and ${countText(more)} more` : '');
}

/**
 * The invalid records of a file in words (`2 with a time no clock gives (a fraction of a second
 * of 10^6 µs or more), 1 with a captured length above the original length`); null when none.
 */
export function invalidRecordsText(h: Pick<CaptureHealth, 'invalidRecords'>): string | null {
  const bad = h.invalidRecords;
  if (bad === undefined) return null;
  const parts: string[] = [];
  if (bad.times > 0)
    parts.push(
      `${countText(bad.times)} with an invalid time (a fraction of a second of 10^6 µs, or 10^9 ns, or more)`,
    );
  if (bad.lengths > 0)
    parts.push(`${countText(bad.lengths)} with a captured length above the original (wire) length`);
  return parts.length === 0 ? null : parts.join(', ');
}

/** A capture file's "frames" cell in the health tables: its frames, and where reading stopped. */
export function fileFramesCell(
  h: Pick<CaptureHealth, 'packets' | 'truncated' | 'damaged' | 'invalidRecords'>,
): string {
  const bad = invalidRecordsText(h);
  const n = countText(h.packets) + (bad === null ? '' : ` (${bad})`);
  if (h.truncated !== undefined)
    return `${n} (the file ends inside a record at byte ${h.truncated.offset})`;
  if (h.damaged !== undefined)
    return `${n} (then damaged at byte ${h.damaged.offset}: ${h.damaged.code}; not read past)`;
  return n;
}

/** A capture file's "dropped" cell in the health tables (report.md, report.html). */
export function fileDroppedCell(
  h: Pick<CaptureHealth, 'kernelDrops' | 'dropsGiven' | 'dropsPartial'>,
): string {
  if (h.kernelDrops !== null)
    return `${countText(h.kernelDrops)}${h.dropsGiven === true ? ' (given)' : ''}`;
  const p = h.dropsPartial;
  if (p === undefined) return 'not recorded';
  return `not recorded for ${unrecordedText(p)}; ${countText(p.recorded)} on the others`;
}

function fileLossPhrase(
  format: 'pcap' | 'pcapng',
  dropped: number | null,
  given: boolean,
  partial: CaptureHealth['dropsPartial'],
): string | null {
  if (dropped !== null && given)
    return dropped > 0 ? `dropped ${countText(dropped)} packets (--drops)` : null;
  if (dropped !== null)
    return dropped > 0 ? `recorded ${countText(dropped)} packets dropped` : null;
  if (partial !== undefined) {
    // A count for some interfaces is no count for the file: the others may have lost anything.
    return (
      `recorded drops for some interfaces only: not recorded for ${unrecordedText(partial)} ` +
      `(no Interface Statistics Block with isb_ifdrop/isb_osdrop for ` +
      `${partial.count === 1 ? 'it' : 'them'}; ${countText(partial.recorded)} dropped on the others)`
    );
  }
  return format === 'pcap'
    ? 'is a classic pcap file, which records no drop counts (tcpdump prints "packets dropped by ' +
        'kernel" when it stops; give that count with --drops)'
    : 'records no drop counts (no Interface Statistics Block with isb_ifdrop/isb_osdrop; dumpcap ' +
        'and tshark write one when they stop)';
}

/**
 * Cautions for the reader: each capture file that ends inside a record (whatever it held after
 * the cut is unknown), and each with records no writer gives (read as given); each point that did
 * not see the request, or saw it but not the reply although the backend saw the request, while its
 * capture lost packets, cannot count them, or never confirmed it ran; and each point that did not
 * see the request while its `namespace/pod` target came from an old pod list. Points without a status (a file no pass read to the end) are skipped.
 */
export function healthCaveats(points: PointSummary[], health: CaptureHealth[]): string[] {
  const out: string[] = [];
  // A reply is expected only once the request reached the last point (the backend), and is in
  // doubt only when it is not known to have come back (seen nearest the client, or acknowledged
  // by the client: reply-path.ts; the verdict then notes the points that did not capture it).
  const replyDue =
    points[points.length - 1]?.seenRequest === true &&
    replyPath(replyPoints(points))?.kind === 'missing';
  for (const p of points) {
    const h = health.find((x) => x.point === p.name);
    if (h === undefined) continue;
    if (h.truncated !== undefined) {
      out.push(
        `${p.name}: ${h.iface} ends inside a record (${h.truncated.detail}): the verdict uses ` +
          `the ${h.packets} frames before it; nothing after them was read`,
      );
    }
    if (h.damaged !== undefined) {
      out.push(
        `${p.name}: ${h.iface} is damaged at byte ${h.damaged.offset} (${h.damaged.code}: ` +
          `${h.damaged.detail}): no reader can find the next record past it, so the verdict uses ` +
          `the ${h.packets} frames before it; nothing after them was read — check the file with ` +
          'tshark -r, or capture again',
      );
    }
    const bad = invalidRecordsText(h);
    if (bad !== null) {
      out.push(
        `${p.name}: ${h.iface} has records no capture writes — ${bad}: they were read as given ` +
          '(libpcap reads them, tcpdump flags them), so times and lengths there are not to be ' +
          'trusted: a damaged file or a faulty writer; check it with tshark -r, or capture again',
      );
    }
    if (!p.seenRequest && h.targetNote !== undefined) {
      out.push(
        `${p.name} did not see the request, and its target was taken from an old pod list ` +
          `(${h.targetNote}): if the pod was recreated since, the capture ran elsewhere; capture ` +
          'again once the Kubernetes API answers',
      );
    }
    const loss = lossPhrase(h);
    if (loss === null) continue;
    if (!p.seenRequest) {
      out.push(
        `${p.name} did not see the request, and its capture ${loss}: the request may be among ` +
          'them; capture again before concluding it never got there',
      );
    } else if (!p.seenReply && replyDue) {
      out.push(
        `${p.name} saw the request but not the reply, and its capture ${loss}: the reply may be ` +
          'among them; capture again before concluding it never came back',
      );
    }
  }
  return out;
}

/** The analysis with the captures' health and the cautions it gives rise to (after its own). */
export function withCaptureHealth(result: AnalysisResult, health: CaptureHealth[]): AnalysisResult {
  const own = result.caveats ?? [];
  const fromHealth = healthCaveats(result.points, health).filter((c) => !own.includes(c));
  return { ...result, captureHealth: health, caveats: [...own, ...fromHealth] };
}
