/**
 * The collector's view of the cluster: lists nodes and pods every `intervalMs` (default 10 s) and
 * keeps the last good snapshot. A periodic list rather than a watch: the inventory only needs to be
 * as fresh as a capture is long, a list recovers from any error by itself, and `readPod` gives a
 * fresh answer where one is needed (a replacement pod during `hoptrace repro`).
 *
 * `namespace/pod` capture targets are read fresh from the API (resolvePodTarget): a pod recreated
 * under the same name (a StatefulSet's) has a new IP the last list does not know, and its old IP
 * may already belong to another pod. The snapshot answers only when the API does not.
 */
import { HoptraceError, isHoptraceError, type ErrorCode } from '../../common/errors';
import type { ApiInventory, ClusterFacts, PodTargetResolution } from '../inventory-live';
import type { CollectorLogger } from '../logger';
import { createKubeApi, type KubeApi, type KubeSource } from './client';
import {
  clusterInventory,
  findPod,
  podNotFound,
  runningPod,
  nodeFacts,
  podFacts,
  type ClusterPod,
  type ClusterSnapshot,
} from './facts';

export const DEFAULT_K8S_INTERVAL_MS = 10_000;

export interface K8sSourceOptions {
  /** The API to list from (tests), or where to load the client configuration. */
  api: KubeApi | KubeSource;
  intervalMs?: number;
  /** Per-request timeout (default 10 s). */
  timeoutMs?: number;
  logger: CollectorLogger;
  nowMs?: () => number;
}

export class K8sInventorySource implements ClusterFacts {
  private snap: ClusterSnapshot | undefined;
  private inv: ApiInventory | undefined;
  private lastError: HoptraceError | undefined;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private closed = false;

  private constructor(
    readonly api: KubeApi,
    private readonly intervalMs: number,
    private readonly log: CollectorLogger,
    private readonly nowMs: () => number,
  ) {}

  /**
   * Loads the configuration (K8S_CONFIG throws: a wrong flag should stop the start), takes the
   * first snapshot (a failure there is logged, not thrown: the API may come up later), then lists
   * every interval.
   */
  static async start(opts: K8sSourceOptions): Promise<K8sInventorySource> {
    const api =
      'kind' in opts.api
        ? await createKubeApi(
            opts.api,
            opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs },
          )
        : opts.api;
    const src = new K8sInventorySource(
      api,
      opts.intervalMs ?? DEFAULT_K8S_INTERVAL_MS,
      opts.logger,
      opts.nowMs ?? Date.now,
    );
    await src.refresh();
    src.schedule();
    return src;
  }

  /** Lists nodes and pods now (concurrent calls share one list). */
  refresh(): Promise<void> {
    this.inflight ??= this.list().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  snapshot(): ClusterSnapshot | undefined {
    return this.snap;
  }

  /** The last listing error, cleared by the next good list. */
  error(): HoptraceError | undefined {
    return this.lastError;
  }

  inventory(): ApiInventory | undefined {
    return this.inv;
  }

  resolvePod(
    namespace: string,
    name: string,
  ): { ok: true; ip: string; node: string } | { ok: false; code: ErrorCode; message: string } {
    const ref = `${namespace}/${name}`;
    const snap = this.snap;
    if (snap === undefined) {
      const e = this.lastError;
      return {
        ok: false,
        code: e?.code === 'K8S_FORBIDDEN' ? 'K8S_FORBIDDEN' : 'K8S_API_UNREACHABLE',
        message: `cannot resolve ${ref}: the pod list was never read from ${this.api.server} (${e?.message ?? 'not yet listed'})`,
      };
    }
    const r = findPod(snap, namespace, name);
    if (r.ok) return { ok: true, ip: r.ip, node: r.node };
    const age = Math.round((this.nowMs() - snap.takenAtMs) / 1000);
    if (r.code === 'K8S_POD_NOT_FOUND' && this.lastError !== undefined) {
      return {
        ok: false,
        code: 'K8S_API_UNREACHABLE',
        message: `${ref} is not in the pod list of ${age} s ago and the API is failing now (${this.lastError.message})`,
      };
    }
    return {
      ok: false,
      code: r.code,
      message: `${r.message} [pod list of ${age} s ago; a pod created since appears within ${Math.round(this.intervalMs / 1000)} s]`,
    };
  }

  /**
   * A `namespace/pod` capture target: its IP and node as the API says now. A pod that is gone is
   * K8S_POD_NOT_FOUND (naming the pods of its namespace at the last list); when reading it fails
   * otherwise (API down, no `get` permission), the last list answers (resolvePod), and the
   * resolution says how old it is.
   */
  async resolvePodTarget(namespace: string, name: string): Promise<PodTargetResolution> {
    let pod: ClusterPod;
    try {
      pod = await this.readPod(namespace, name);
    } catch (e) {
      const err = isHoptraceError(e) ? e : undefined;
      // Gone now, whatever the last list says: name the pods it listed beside it.
      if (err?.code === 'K8S_POD_NOT_FOUND')
        return podNotFound(this.snap?.pods ?? [], namespace, name);
      const r = this.resolvePod(namespace, name);
      if (!r.ok) return r;
      const age = Math.round((this.nowMs() - (this.snap?.takenAtMs ?? 0)) / 1000);
      return {
        ...r,
        stale: `reading ${namespace}/${name} from the API failed (${err?.message ?? String(e)}): as listed ${age} s ago`,
      };
    }
    const r = runningPod(pod);
    return r.ok ? { ok: true, ip: r.ip, node: r.node } : r;
  }

  /** One pod, fresh from the API (K8S_POD_NOT_FOUND, K8S_API_UNREACHABLE …). */
  async readPod(namespace: string, name: string): Promise<ClusterPod> {
    const p = podFacts(await this.api.readPod(namespace, name));
    if (p === null) {
      throw new HoptraceError('K8S_API_UNREACHABLE', `the API returned a pod without a name`, {
        where: this.api.server,
      });
    }
    return p;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      void this.refresh().then(() => {
        this.schedule();
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  private async list(): Promise<void> {
    try {
      const [nodes, pods] = await Promise.all([this.api.listNodes(), this.api.listPods()]);
      const snap: ClusterSnapshot = {
        nodes: nodes.map(nodeFacts).filter((n) => n !== null),
        pods: pods.map(podFacts).filter((p) => p !== null),
        takenAtMs: this.nowMs(),
      };
      this.snap = snap;
      this.inv = clusterInventory(snap);
      if (this.lastError !== undefined)
        this.log.info({ state: 'listed' }, `Kubernetes API reachable again at ${this.api.server}`);
      this.lastError = undefined;
      this.log.debug(
        { count: snap.pods.length },
        `listed ${snap.nodes.length} nodes and ${snap.pods.length} pods`,
      );
    } catch (e) {
      const err = isHoptraceError(e)
        ? e
        : new HoptraceError('K8S_API_UNREACHABLE', e instanceof Error ? e.message : String(e), {
            where: this.api.server,
          });
      // One line per change of error, not one per interval.
      if (this.lastError?.message !== err.message) this.log.warn({ code: err.code }, err.message);
      this.lastError = err;
    }
  }
}
