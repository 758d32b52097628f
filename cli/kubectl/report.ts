/**
 * `kubectl hoptrace report ID`: the bundle of a finished capture (report.md, report.json,
 * report.html, sequence.svg, evidence.pcapng, inventory.json, SHA256SUMS) or of a repro (`r-…`:
 * the same with timeline.svg for sequence.svg), downloaded through the port-forward into
 * `./hoptrace-<ID>/` and checked against its SHA256SUMS (bundle-download.ts). evidence.pcapng
 * exists only once the agents answered for their frames, a few seconds after the verdict: it is
 * waited for (--evidence-wait), then left out with a note.
 */
import { resolve } from 'node:path';
import { CAPTURE_ID_RE, REPRO_ID_RE } from '../../collector';
import { HoptraceError } from '../../common/errors';
import { parseDuration } from '../capture';
import { EXIT } from '../exit-codes';
import { downloadBundle, downloadedLines } from './bundle-download';
import { linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';

export const USAGE = `kubectl hoptrace report ID [--out DIR] [--evidence-wait 30s] ${KUBE_USAGE}`;

export async function runReport(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, positionals, kube, hoptraceNamespace } = parseKubectlArgs('report', USAGE, argv, {
    out: { type: 'string' },
    'evidence-wait': { type: 'string' },
  });
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0 || !(CAPTURE_ID_RE.test(id) || REPRO_ID_RE.test(id))) {
    throw new HoptraceError(
      'CLI_USAGE',
      id === undefined
        ? 'give the capture or repro ID'
        : `'${positionals.join(' ')}' is not one capture or repro ID`,
      { where: 'kubectl hoptrace report', hint: `usage: ${USAGE}` },
    );
  }
  const evidenceWaitMs = parseDuration(values['evidence-wait'] ?? '30s', '--evidence-wait');
  const cluster = await deps.connect(kube);
  const link = await linkCollector(cluster, hoptraceNamespace);
  const dir = resolve(deps.cwd, values.out ?? `hoptrace-${id}`);
  const d = await downloadBundle(link.client, id, dir, {
    evidenceWaitMs,
    ...(deps.pollMs === undefined ? {} : { pollMs: deps.pollMs }),
  });
  for (const l of downloadedLines(d)) deps.out(l);
  return EXIT.ok;
}
