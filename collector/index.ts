/**
 * The collector's public face: what the `hoptrace` command, the lab and the bench may use of it.
 * Start one (startCollector), and the shapes of its HTTP API for clients: captures, agents,
 * repros, and the syntax of a capture target; and the Kubernetes client pieces the kubectl plugin
 * shares with it (client-node's loader, the capped transport). Everything else in collector/ is
 * internal.
 */
export {
  startCollector,
  type AgentAuthOptions,
  type CollectorOptions,
  type RunningCollector,
} from './main';
export { readNodeTokens, parseNodeTokens } from './agent-auth';
export { LOG_LEVELS, type LogLevel } from './logger';
export { DEFAULT_MAX_FINISHED_HELD, DEFAULT_MAX_LIVE_CAPTURES } from './sessions';
export { DEFAULT_MAX_FINISHED_REPROS } from './repro';
export {
  DEFAULT_RETAIN_FINISHED,
  DEFAULT_RETAIN_FINISHED_REPROS,
  type RetentionPolicy,
} from './disk-retention';
export type { AgentView, CaptureView, PointView } from './capture-views';
export { accounted, FINAL_STATES, type PointSpec, type SessionState } from './session';
export {
  isValidTarget,
  parsePodTarget,
  MAX_TIMEOUT_MS as MAX_CAPTURE_TIMEOUT_MS,
  MIN_TIMEOUT_MS as MIN_CAPTURE_TIMEOUT_MS,
} from './capture-request';
export type { ReproView } from './repro';
export { REPRO_FILES, type ReproFileName } from './repro-bundle';
export { loadClientLibrary } from './k8s/client';
export { API_MAX_REPLY_BYTES, apiConfiguration } from './k8s/api-http';
export { BUNDLE_FILES, CAPTURE_ID_RE, REPRO_ID_RE, type BundleFileName } from './store';
