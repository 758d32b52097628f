/**
 * node:util parseArgs's complaints in one line of hoptrace's words (cli/args.ts parseArgsText):
 * the long form of a flag named, and --flag=VALUE advised for a value that starts with '-'.
 */
import { parseArgs } from 'node:util';
import t from 'tap';
import { parseArgsText } from '../../cli/args';

const options = { namespace: { type: 'string', short: 'n' }, json: { type: 'boolean' } } as const;

function complaint(args: string[]): string {
  try {
    parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (e) {
    return parseArgsText(e);
  }
  throw new Error(`parseArgs took ${args.join(' ')}`);
}

void t.test('each complaint of parseArgs, in one line', (t) => {
  t.equal(complaint(['--bogus']), "unknown flag '--bogus'");
  t.equal(complaint(['-x']), "unknown flag '-x'");
  t.equal(complaint(['--json=1']), "'--json' takes no value");
  t.equal(complaint(['--namespace']), "'--namespace' needs a value");
  // "Option '-n, --namespace <value>' argument missing": the long form, not '-n,' (a first version).
  t.equal(complaint(['-n']), "'--namespace' needs a value");
  t.equal(
    complaint(['-n', '-5']),
    "'--namespace' needs a value; for one that starts with '-', write --namespace=VALUE",
  );
  t.equal(complaint(['extra']), "unexpected argument 'extra'");
  t.end();
});
