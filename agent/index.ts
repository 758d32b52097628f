/**
 * The agent's public face: what the `hoptrace` command and the bench may use of it. Start one
 * (startAgent); the node reads that `hoptrace doctor`'s local mode runs in-process (namespace
 * facts, the denied-source test, a namespace's addresses); the namespace capture and the file
 * replay the bench measures (with or without frame retention); the capabilities it needs (the lab and the deploy tests check them). Everything else
 * in agent/ is internal.
 */
export { startAgent, type AgentOptions } from './main';
export { AGENT_CAPABILITIES, capabilityBits, type AgentCapability } from './capabilities';
export { readNamespaceFacts } from './doctor/read';
export { runDeniedTest } from './doctor/denied';
export { namespaceInventory } from './netns/addresses';
export { NsCapture } from './capture/ns-capture';
export { FileSource } from './capture/file-source';
export type { CaptureSpec } from './capture/source';
export type { RetentionTarget } from './capture/retention';
