/**
 * bench/large-report.ts: the large three-point case's goal rows and rows — the two-core floor and
 * Node's start without NODE_EXTRA_CA_CERTS where a run measured them, nothing of them where it did
 * not (results.json files of earlier runs).
 */
import t from 'tap';
import type { Goal } from '../../bench/goal';
import type { LargeFileResult, LargeTrial } from '../../bench/large-files';
import { largeFileSection } from '../../bench/large-report';

const cost = (wallS: number): LargeTrial['cat'] => ({
  wallS,
  peakRssMiB: 70,
  cpuS: wallS,
  code: 0,
  stderrTail: '',
});

function result(extra: Partial<LargeTrial>): LargeFileResult {
  const trial: LargeTrial = {
    cat: cost(0.125),
    analyze: cost(0.45),
    tcpdumpS: 60,
    tcpdumpCpuS: 60,
    tcpdumpTzS: 30,
    tcpdumpTzCpuS: 30,
    nodeStartS: 0.1,
    floorS: 0.4,
    cFloorS: 0.17,
    ...extra,
  };
  return {
    framesPerPoint: 3_800_000,
    totalMiB: 1555,
    trials: [trial],
    median: {
      catS: 0.125,
      analyzeS: 0.45,
      analyzeCpuS: 0.7,
      analyzeRssMiB: 70,
      tcpdumpS: 60,
      tcpdumpTzS: 30,
      nodeStartS: 0.1,
      floorS: 0.4,
      cFloorS: 0.17,
      ...(extra.cFloor2S === undefined ? {} : { cFloor2S: extra.cFloor2S }),
      ...(extra.nodeStartNoCaS === undefined ? {} : { nodeStartNoCaS: extra.nodeStartNoCaS }),
      ...(extra.analyzeNoCaS === undefined ? {} : { analyzeNoCaS: extra.analyzeNoCaS }),
    },
    rss: [
      { scale: 0.1, framesPerPoint: 380_000, totalMiB: 155, peakRssMiB: 65, wallS: 0.2 },
      { scale: 1, framesPerPoint: 3_800_000, totalMiB: 1555, peakRssMiB: 70, wallS: 0.45 },
    ],
    analyzeLayer: 'preserved',
    date: '2026-12-06T00:00:00.000Z',
    loadBefore: '0',
    loadAfter: '0',
  };
}

void t.test('the two-core floor and the unset NODE_EXTRA_CA_CERTS, where measured', (t) => {
  const goals: Goal[] = [];
  const md = largeFileSection(
    result({ cFloor2S: 0.1, nodeStartNoCaS: 0.055, analyzeNoCaS: 0.4 }),
    goals,
  );
  const cat = goals.find((g) => g.goal.includes('≤ 2× `cat`'));
  t.equal(cat?.met, 'missed', '0.45 s is 3.6× 0.125 s');
  t.match(
    cat?.result ?? '',
    /with it unset Node's start is 0\.06 s and analyze 0\.40 s, 3\.20× cat/,
  );
  t.match(
    cat?.result ?? '',
    /floor-walk\.c -2\) 0\.10 s, 0\.80× cat, with Node's start 1\.60× \(1\.24× with NODE_EXTRA_CA_CERTS unset\) — the least an analysis .*: below the goal in this run/,
  );
  t.match(
    md,
    /\| C floor-walk -2 \(the first file, then the others on two threads, no Node\) \| 0\.10 \|/,
  );
  t.match(md, /\| hoptrace analyze, NODE_EXTRA_CA_CERTS unset \| 0\.40 \|/);
  t.match(md, /\| node -e 0, NODE_EXTRA_CA_CERTS unset \| 0\.06 \|/);
  t.end();
});

void t.test('a run that measured neither renders without them', (t) => {
  const goals: Goal[] = [];
  const md = largeFileSection(result({}), goals);
  const cat = goals.find((g) => g.goal.includes('≤ 2× `cat`'));
  t.notMatch(cat?.result ?? '', /NODE_EXTRA_CA_CERTS|-2\)/);
  t.notMatch(md, /\| C floor-walk -2 \(|\| hoptrace analyze, NODE_EXTRA_CA_CERTS unset/);
  t.match(
    md,
    /\| 1 \| 0\.13 \| 0\.45 \|.*\| – \|$/m,
    'the trial row says "–" for the missing walk',
  );
  t.end();
});

void t.test("the floor's words follow the run's figures", (t) => {
  const words = (cFloor2S: number): string => {
    const goals: Goal[] = [];
    largeFileSection(result({ cFloor2S, nodeStartNoCaS: 0.055, analyzeNoCaS: 0.4 }), goals);
    return goals.find((g) => g.goal.includes('≤ 2× `cat`'))?.result ?? '';
  };
  // cat 0.125 s, Node's start 0.1 s (0.055 s unset): 2× cat is 0.25 s.
  t.match(words(0.2), /above the goal in this run, before anything is decoded/, '2.40× and 2.04×');
  t.match(words(0.17), /above the goal as the run was .* below it without/, '2.16× and 1.80×');
  t.match(words(0.1), /below the goal in this run: what keeps analyze above it/, '1.60× and 1.24×');
  t.end();
});
