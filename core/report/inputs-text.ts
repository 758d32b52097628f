/**
 * The words of a report's inputs (the Reproduce section): each file with its digest, or each live
 * point's agent, version, node, target, interface, filter and the events the collector received
 * (and their file as stored, with its digest),
 * then the evidence frames and evidence.pcapng as written; the capture and its collector; the
 * inventory as used; SHA256SUMS; and the runtime line (what analysed it, on which Node and
 * platform). report.md and report.html both render these pieces, so the two forms always list the
 * same facts. Pure.
 */
import { sourceOf, type GivenFile, type ReportMeta } from './report-document';

/** Part of a line: words, or a literal (a path, a digest, a filter) that a form sets as code. */
export type Piece = { text: string } | { code: string };

const w = (text: string): Piece => ({ text });
const lit = (code: string): Piece => ({ code });

/** The sentence before the list. */
export function inputsLead(meta: ReportMeta): string {
  return `Inputs${meta.hoptraceVersion === undefined ? '' : ` (read by hoptrace ${meta.hoptraceVersion})`}:`;
}

/** One list item per input, then the capture's and the inventory's. */
export function inputsLines(meta: ReportMeta): Piece[][] {
  const live = sourceOf(meta) === 'live';
  const out: Piece[][] = [];
  for (const i of meta.inputs) {
    const line: Piece[] = [w(`${i.name}: `), lit(i.file)];
    if (i.sha256 === null) line.push(w(' (not hashed)'));
    else if (i.sha256 !== undefined)
      line.push(w(` — ${i.bytes ?? '?'} bytes, SHA-256 `), lit(i.sha256));
    const l = live ? i.live : undefined;
    if (l !== undefined) {
      const version = l.agentVersion === null ? '' : ` (${l.agentVersion})`;
      line.push(
        w(
          ` — agent ${l.agentId ?? '?'}${version} on node ${l.node ?? '?'}, ${l.target} ${l.iface}, filter `,
        ),
        l.filter === null ? w('none') : lit(l.filter),
      );
      if (l.eventsReceived !== undefined)
        line.push(w(`; ${l.eventsReceived} events received from it and stored`));
      const f = l.eventsFile;
      if (f === null) line.push(w('; the collector stored no events file for it'));
      else if (f !== undefined)
        line.push(
          w('; its events as stored: '),
          lit(f.file),
          w(` — ${f.bytes} bytes, SHA-256 `),
          lit(f.sha256),
        );
    }
    out.push(line);
  }
  if (live) out.push(liveEvidenceLine(meta));
  const c = meta.capture;
  if (c !== undefined)
    out.push([
      w(
        `capture ${c.id} on ${c.collector ?? 'a collector listening on every address'}: ${c.state} (${c.reason})`,
      ),
    ]);
  const inv = meta.inventoryUsed;
  const given = meta.givenFiles;
  if (inv !== undefined) {
    const nodes = Object.keys(inv.nodes).length;
    const pods = Object.keys(inv.pods).length;
    const file = given?.inventory;
    out.push([
      w(`inventory as used: ${nodes} node(s), ${pods} pod(s)`),
      ...(file !== undefined && file !== null
        ? [w(', from '), ...givenFileText(file)]
        : meta.inventory === undefined
          ? []
          : [w(' ('), lit(meta.inventory), w(')')]),
      w('; in report.json '),
      lit('inventory'),
    ]);
  }
  if (given?.doctor !== undefined && given.doctor !== null)
    out.push([w('doctor: '), ...givenFileText(given.doctor)]);
  if (meta.manifest !== undefined)
    out.push([
      lit(meta.manifest),
      w(': the SHA-256 of every other file of this bundle, written last; check them with '),
      lit(`sha256sum -c ${meta.manifest}`),
      w(" in the bundle's directory (to detect a deliberate change too, keep "),
      lit(meta.manifest),
      w("'s own SHA-256 with the incident)"),
    ]);
  return out;
}

/**
 * A live capture's other input: the frames the points' agents gave for evidence.pcapng, and the
 * file as the collector wrote it (never a digest of bytes it did not write).
 */
function liveEvidenceLine(meta: ReportMeta): Piece[] {
  const e = meta.evidence;
  if (e === undefined || e.file === null)
    return [
      w(
        'evidence frames: none were in hand when this report was written (a collector that fetches them asks the agents after the verdict, and rewrites the report): no evidence.pcapng with it',
      ),
    ];
  const missing = e.problems.map((p) => `${p.point} ${p.code}`);
  const line: Piece[] = [
    w(
      `evidence frames: asked of each point's agent after the verdict; ${e.packets} packets of the matched connection written as `,
    ),
    lit(e.file),
  ];
  if (e.sha256 !== undefined) line.push(w(` — ${e.bytes ?? '?'} bytes, SHA-256 `), lit(e.sha256));
  if (missing.length > 0) line.push(w(`; not given: ${missing.join(', ')}`));
  return line;
}

/** A file given by flag: its path, digest and the bundle's copy of it. */
function givenFileText(f: GivenFile): Piece[] {
  const out: Piece[] = [lit(f.file)];
  if (f.sha256 === null) return [...out, w(' (could not be read: not hashed, not copied)')];
  out.push(w(` — ${f.bytes ?? '?'} bytes, SHA-256 `), lit(f.sha256));
  if (f.copy !== null)
    out.push(
      ...(f.verbatim
        ? [w("; copied byte for byte as the bundle's "), lit(f.copy)]
        : [
            w("; the bundle's "),
            lit(f.copy),
            w(' holds it as parsed and re-serialised, so its digest differs'),
          ]),
    );
  return out;
}

/** The collector's runtime in words: `hoptrace 0.3.0 on Node v20.11.1 (linux x64)`. */
export function collectorRuntimeText(
  version: string,
  r: { node: string; platform: string },
): string {
  return `hoptrace ${version} on Node ${r.node} (${r.platform})`;
}

/**
 * What the report was made with: files analysed by this version on this Node, with or without
 * the native decoder (the reproduce command's `hoptrace`), or a live capture analysed by the
 * collector (null: not recorded).
 */
export function madeWithLine(meta: ReportMeta): Piece[] | null {
  const r = meta.runtime;
  if (r === undefined) return null;
  const version = meta.hoptraceVersion ?? 'unknown';
  if (r.analyzedBy === 'collector')
    return [
      w(
        `Analysed by the collector: ${collectorRuntimeText(version, r)}; the agents captured and decoded the packets (each agent's version under Inputs).`,
      ),
    ];
  const decoder =
    r.nativeDecoder === 'loaded'
      ? 'the native decoder loaded (capture files read through its fast path)'
      : 'the native decoder not loaded (the TypeScript reader and decoder: the same verdict, slower)';
  const on = r.platform === undefined ? '' : ` (${r.platform})`;
  return [
    w(`Made with hoptrace ${version} on Node ${r.node}${on}, ${decoder}. Where `),
    lit('hoptrace'),
    w(' is not on PATH, put '),
    lit('node /path/to/hoptrace/bin/hoptrace'),
    w(` (of hoptrace ${version}) in its place.`),
  ];
}
