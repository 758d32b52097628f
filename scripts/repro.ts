/**
 * `node dist/scripts/repro.js [--only NAME[,NAME]]`: the lab's repro scenarios (pinned route,
 * stable gateway, SNAT), each with the VPN pod deleted and rescheduled mid-run; prints the per-probe
 * timelines. Exit 1 when a scenario does not behave as configured, 2 when the lab cannot run.
 */
import { parseArgs } from 'node:util';
import { isHoptraceError } from '../common/errors';
import { assertLabPrerequisites } from '../lab/prereq';
import { printLabRepros } from '../lab/repro-print';

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { only: { type: 'string' } } });
  try {
    assertLabPrerequisites();
  } catch (e) {
    process.stderr.write(`${isHoptraceError(e) || e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  const bad = await printLabRepros((l) => process.stdout.write(`${l}\n`), values.only?.split(','));
  return bad === 0 ? 0 : 1;
}

void main().then((code) => {
  process.exitCode = code;
});
