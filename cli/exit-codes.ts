/**
 * hoptrace's exit codes, one table for every command (README "Exit codes"). Scripts and CI jobs
 * branch on these, so they never change meaning.
 */
export const EXIT = {
  /** Done: the command did what it was asked (a conclusive verdict, a clean doctor run). */
  ok: 0,
  /** An error with a code on stderr: unreadable input, a refused request, an unreachable peer. */
  error: 1,
  /** A usage error: a flag, value or argument the command does not take (CLI_USAGE). */
  usage: 2,
  /** A capture ended without a conclusive verdict (timeout, cancelled, failed); analyze: unknown. */
  inconclusive: 3,
  /** doctor found at least one error. */
  findings: 4,
  /** A bug in hoptrace: the message says so, with the stack to report. */
  internal: 70,
} as const;
