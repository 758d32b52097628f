/** One goal row of BENCHMARKS.md's goals table (bench/report.ts and the sections it renders). */
export type Goal = {
  goal: string;
  result: string;
  met:
    | 'met'
    | 'missed'
    | 'not measured'
    | 'no loss at any rate offered'
    | '**missed**: out of reach for Node here';
};
