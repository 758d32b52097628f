/**
 * The identity-header scan (core/report/identity-scan.ts) in words, for "What to change" (and so
 * for every form that renders it: Markdown, HTML, report.json) and the text report. Says how far
 * each point was read: a header past a cut frame, a missing segment or the scan's bound was not
 * seen, which is never written as "no header". Pure.
 */
import type {
  AnalysisResult,
  IdentityHeaderScan,
  IdentityHeaderSeen,
  IdentityScanContinued,
  IdentityScanCut,
} from './analysis-result';

/**
 * Why a live capture's request heads were not read when it did not ask for the payload (the scan,
 * identity-scan.ts, puts it on each point it leaves out; the words here leave those out of the
 * list of what was not scanned, as the headers-only sentence says it once).
 */
export const HEADERS_ONLY_WHY =
  'its agent retained the frames headers only, no payload bytes (the capture did not ask for them: capture with --evidence-payload, evidencePayload in POST /v1/captures)';

const IDENTITY_HEADERS = 'X-Forwarded-For, Forwarded, X-Real-IP or PROXY protocol header';
const IDENTITY_HEADERS_OR = 'X-Forwarded-For, Forwarded, X-Real-IP or a PROXY protocol line';

const segmentsText = (n: number): string =>
  n === 1 ? 'its first data segment' : `its first ${n} data segments`;

/** A cut frame's scan: how far it read, and that a header past those bytes was not seen. */
export function cutText(c: IdentityScanCut): string {
  const over = (c.segments ?? 1) > 1 ? ` in ${segmentsText(c.segments ?? 1)}` : '';
  return `at ${c.point} only the first ${c.payloadBytes} of the request's ${c.payloadLength} payload bytes${over} were looked at (${c.why}): a header past them could not be seen`;
}

/** A head that went on past the segments read: how far it was read, and why no further. */
export function continuedText(c: IdentityScanContinued): string {
  return `at ${c.point} the request's headers continued past the ${c.payloadBytes} payload bytes of ${segmentsText(c.segments)} read (${c.why}): a header past them could not be seen`;
}

/** A live capture without the payload: why no request head was read, and how to get one. */
export function headersOnlyText(): string {
  return (
    `whether the request carries ${IDENTITY_HEADERS_OR} was not looked for: the payload was not retained ` +
    '(the agents kept each frame only up to its transport header, as the capture did not ask for the payload; ' +
    "capture again with --evidence-payload — evidencePayload: true in POST /v1/captures — to read the request's headers)"
  );
}

/** Each point not read to the end of its request head, in words. */
export function partialTexts(scan: IdentityHeaderScan): string[] {
  if (scan.headersOnly === true) return [headersOnlyText()];
  return [...scan.cut.map(cutText), ...(scan.continued ?? []).map(continuedText)];
}

/** The scan in words, and the headers already there at the first point (set by the client). */
export function identityText(r: AnalysisResult): {
  text: string;
  clientSet: IdentityHeaderSeen[];
} {
  const scan = r.identityHeaders;
  if (scan === undefined)
    return {
      text:
        'whether the request carries X-Forwarded-For, Forwarded, X-Real-IP or a PROXY protocol line was not looked ' +
        "for (the request's payload bytes were not read: a live capture's are read from the frames its agents retained, once they are fetched)",
      clientSet: [],
    };
  if (scan.headersOnly === true) {
    const other = scan.notScanned
      .filter((n) => n.why !== HEADERS_ONLY_WHY)
      .map((n) => `; not read at ${n.point}: ${n.why}`)
      .join('');
    return { text: headersOnlyText() + other, clientSet: [] };
  }
  const first = r.points[0]?.name;
  const clientSet = scan.seen.filter((h) => h.point === first);
  const partAt = new Set([...scan.cut, ...(scan.continued ?? [])].map((c) => c.point));
  const whole = scan.scanned.filter((p) => !partAt.has(p));
  // A partial scan says how far it read: a header past those bytes was not seen, not absent.
  const partial = partialTexts(scan);
  const unread = scan.notScanned.map((n) => `not read at ${n.point}: ${n.why}`);
  const tail = [...partial, ...unread].map((x) => `; ${x}`).join('');
  if (scan.seen.length === 0) {
    const head =
      whole.length > 0
        ? `no ${IDENTITY_HEADERS} in the request's headers at ${whole.join(', ')}`
        : partial.length > 0
          ? `no ${IDENTITY_HEADERS} in the bytes looked at`
          : `no ${IDENTITY_HEADERS} looked for at any point (none was read)`;
    return { text: head + tail, clientSet };
  }
  const seen = scan.seen.map((h) => `${h.kind} \`${h.value}\` at ${h.point} (frame ${h.frame})`);
  const trust =
    clientSet.length > 0
      ? `; already there at ${first}, so the client sent it: it cannot be trusted unless a proxy you control overwrites it`
      : first !== undefined && whole.includes(first)
        ? '; not at the first point, so something on the path added it'
        : `; ${first ?? 'the first point'}'s request was not read whole, so whether the client sent it or the path added it is not known`;
  return { text: `the request carries ${seen.join(', ')}${trust}${tail}`, clientSet };
}
