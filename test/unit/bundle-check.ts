/**
 * One capture's or analysis's bundle checked form by form, the same way wherever it was made (the
 * offline and the live lab scenarios): report.json valid against proto/report.schema.json and
 * naming the expected verdict; report.md naming it too; report.html and sequence.svg well-formed,
 * with no script or outside fetch and one lane per point; evidence.pcapng read back by tshark with
 * every packet of the matched connection, each on its point's interface; inventory.json what the
 * verdict was computed from.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type tap from 'tap';
import type { ReportDocument } from '../../core/report/report-document';
import { BUNDLE_FILES } from '../../collector/store';
import { markupErrors } from './markup-check';
import { reportSchemaErrors } from './report-schema';
import { tsharkColumn } from './tshark';

type Asserts = Pick<typeof tap, 'equal' | 'same' | 'ok' | 'match' | 'notMatch'>;

/** What the bundle is expected to say. */
export interface BundleExpectation {
  /** The points in path order. */
  points: readonly string[];
  /** The verdict's layer. */
  layer: string;
  /**
   * Per point, a name its namespace must carry in the picture's lane (`netns …`); a live capture's
   * lanes name the namespace the agent captured in, a file's have none.
   */
  namespaces?: Readonly<Record<string, string>>;
}

const lanes = (x: string): number => (x.match(/class="lane"/g) ?? []).length;

/** Each lane's full label (its `<title>`, never clipped), by point. */
function laneTitles(x: string): Map<string, string> {
  const re = /<g class="lane"[^>]*data-point="([^"]*)"[^>]*><title>([^<]*)<\/title>/g;
  return new Map([...x.matchAll(re)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

/** The interface name of every packet of `file`, as tshark reads them (null: tshark failed). */
function tsharkInterfaces(t: Asserts, file: string): string[] | null {
  try {
    return tsharkColumn(file, 'frame.interface_name');
  } catch (e) {
    t.ok(false, `tshark reads evidence.pcapng (${e instanceof Error ? e.message : String(e)})`);
    return null;
  }
}

/** Checks every form of the bundle in `dir`; returns report.json as read. */
export function checkBundle(t: Asserts, dir: string, want: BundleExpectation): ReportDocument {
  for (const f of BUNDLE_FILES) t.ok(existsSync(join(dir, f)), `bundle: ${f} written`);
  const doc = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as ReportDocument;
  t.same(reportSchemaErrors(doc), [], 'report.json is valid against proto/report.schema.json');
  t.equal(doc.verdict.layer, want.layer, 'report.json: the verdict');
  t.same(
    doc.points.map((p) => p.name),
    [...want.points],
    'report.json: every point in path order',
  );
  t.match(readFileSync(join(dir, 'report.md'), 'utf8'), want.layer, 'report.md names the verdict');

  const html = readFileSync(join(dir, 'report.html'), 'utf8');
  const svg = readFileSync(join(dir, 'sequence.svg'), 'utf8');
  t.same(markupErrors(html, true), [], 'report.html is well-formed');
  t.same(markupErrors(svg), [], 'sequence.svg is well-formed');
  t.notMatch(html, /<script|\ssrc="(?:https?:)?\/\//i, 'report.html: no script, nothing fetched');
  t.equal(lanes(html), want.points.length, 'report.html: a lane per point');
  t.equal(lanes(svg), want.points.length, 'sequence.svg: a lane per point');
  for (const [point, ns] of Object.entries(want.namespaces ?? {}))
    for (const [form, text] of [
      ['report.html', html],
      ['sequence.svg', svg],
    ] as const) {
      const netns = /, netns ([^,;]+)/.exec(laneTitles(text).get(point) ?? '')?.[1] ?? '';
      t.ok(netns.includes(ns), `${form}: ${point}'s lane names its namespace ${ns} (${netns})`);
    }

  const flows = doc.points.reduce((n, p) => n + p.flow.length, 0);
  t.equal(doc.evidence?.packets, flows, 'evidence.pcapng: every packet of the matched connection');
  t.same(doc.evidence?.problems, [], 'evidence.pcapng: every point had its frames');
  const names = tsharkInterfaces(t, join(dir, 'evidence.pcapng'));
  if (names !== null) {
    t.equal(names.length, flows, 'tshark counts them');
    for (const i of doc.evidence?.interfaces ?? [])
      t.equal(
        names.filter((n) => n === i.name).length,
        i.packets,
        `tshark: ${i.packets} packets on ${i.name}`,
      );
  }
  t.same(
    JSON.parse(readFileSync(join(dir, 'inventory.json'), 'utf8')),
    doc.inventory,
    'inventory.json is the inventory the verdict was computed from',
  );
  return doc;
}
