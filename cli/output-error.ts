/**
 * A write to standard output that failed (a full disk: ENOSPC, an I/O error) as the CLI_OUTPUT
 * error a user reads, instead of Node's stack trace. A closed pipe (EPIPE) is not one: a reader
 * that went away (`| head`) ends the output.
 */
import { HoptraceError } from '../common/errors';

export function outputError(e: NodeJS.ErrnoException): HoptraceError {
  return new HoptraceError(
    'CLI_OUTPUT',
    `standard output could not be written: ${e.code ?? 'error'} (${e.message})`,
    {
      where: 'stdout',
      hint: 'what was written is incomplete; free space where the output goes, or send it elsewhere',
    },
  );
}
