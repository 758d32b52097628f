/** The collector's RSS and CPU over a scenario, sampled from /proc while it runs. */
import { cpuNs, rssMiB } from '../proc';

export interface Samples {
  /** [ms since start, MiB] */
  rss: [number, number][];
  /** CPU seconds the collector used between start and stop (null when it was not running). */
  cpuS: number | null;
  wallS: number;
}

export interface Sampler {
  stop(): Samples;
  /** The latest RSS sample (MiB), null before the first. */
  last(): number | null;
}

/** Samples `pid()` every `everyMs` (the pid may change: a restarted collector). */
export function sampleCollector(pid: () => number | undefined, everyMs = 250): Sampler {
  const t0 = Date.now();
  const rss: [number, number][] = [];
  const cpu0 = (() => {
    const p = pid();
    return p === undefined ? null : cpuNs(p);
  })();
  const take = (): void => {
    const p = pid();
    const r = p === undefined ? null : rssMiB(p);
    if (r !== null) rss.push([Date.now() - t0, r]);
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    last: () => rss[rss.length - 1]?.[1] ?? null,
    stop: () => {
      clearInterval(timer);
      take();
      const p = pid();
      const cpu1 = p === undefined ? null : cpuNs(p);
      return {
        rss,
        cpuS: cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / 1e9,
        wallS: (Date.now() - t0) / 1000,
      };
    },
  };
}

/** Peak of the RSS samples (MiB). */
export function peakRss(s: Samples): number {
  return Math.max(...s.rss.map(([, r]) => r));
}
