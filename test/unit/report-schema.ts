/**
 * proto/report.schema.json and proto/repro-report.schema.json compiled once with ajv (JSON Schema
 * 2020-12, strict): every test that produces a report.json checks it here, so a member the schema
 * requires cannot go missing and one it does not know cannot appear unnoticed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';

const root = join(__dirname, '..', '..', '..');
const schema = JSON.parse(
  readFileSync(join(root, 'proto', 'report.schema.json'), 'utf8'),
) as object;
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);

const validateRepro = new Ajv2020({ allErrors: true, strict: true }).compile(
  JSON.parse(readFileSync(join(root, 'proto', 'repro-report.schema.json'), 'utf8')) as object,
);

function complaints(v: typeof validate, doc: unknown): string[] {
  if (v(doc)) return [];
  return (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
}

/** The schema's complaints about `doc` (empty: valid). */
export function reportSchemaErrors(doc: unknown): string[] {
  return complaints(validate, doc);
}

/** proto/repro-report.schema.json's complaints about a repro's report.json (empty: valid). */
export function reproReportSchemaErrors(doc: unknown): string[] {
  return complaints(validateRepro, doc);
}
