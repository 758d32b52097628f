/**
 * The names an agent goes by: its node's name and its agent id. One rule for the agent (which
 * checks its own at start), the collector's hello check, agents.json and the API's `node` field,
 * so a name one of them takes is never refused by another later.
 */

/**
 * A node name: 1–253 characters, letters, digits, '.', '_' and '-', starting with a letter or a
 * digit. Kubernetes node names (RFC 1123 subdomains: lowercase, at most 253) all fit, and so do
 * the host names an agent outside a cluster takes by default (`hostname()`: upper case happens).
 */
export const NODE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;

/**
 * An agent id at most: an agent names itself `<node>-<6 hex digits>`, so 253 + 7 characters; an
 * id given with --agent-id fits the same bound.
 */
export const AGENT_ID_MAX_LENGTH = 260;

/** Why `node` is not a node name (null: it is one); says what the rule is. */
export function nodeNameProblem(node: string): string | null {
  if (NODE_NAME_RE.test(node)) return null;
  const shown = node.length > 64 ? `${node.slice(0, 64)}… (${node.length} characters)` : node;
  return `'${shown}' is not a node name (1-253 letters, digits, '.', '_' or '-', starting with a letter or digit)`;
}

/** Why `agentId` is not an agent id (null: it is one). */
export function agentIdProblem(agentId: string): string | null {
  if (agentId === '') return 'the agent id is empty';
  if (agentId.length > AGENT_ID_MAX_LENGTH)
    return `an agent id of ${agentId.length} characters (at most ${AGENT_ID_MAX_LENGTH})`;
  return null;
}
