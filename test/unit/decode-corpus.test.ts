/**
 * Cheap fuzzing over the public corpus: every prefix of every frame in test/pcaps decodes
 * without throwing, never finds more layers than the whole frame, and a prefix that loses a layer
 * (cut inside a header) says truncated.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { openCaptureFile } from '../../offline/pcap-file';
import { decodeFrame } from '../../core/decode/frame';
import { PCAPS } from './corpus';

const pcaps = PCAPS;
const files = readdirSync(pcaps)
  .filter((f) => /\.(pcap|pcapng)$/.test(f) && !f.startsWith('libpcap_'))
  .sort();

void t.test('every prefix of every corpus frame', (t) => {
  let prefixes = 0;
  let problems = 0;
  for (const file of files) {
    for (const f of openCaptureFile(join(pcaps, file)).frames()) {
      const full = decodeFrame(f.linktype, f.data);
      const n = full.layers.length;
      // Frames over 2 KiB (BIG TCP) only need their header prefixes walked.
      const limit = Math.min(f.data.length, 2048);
      for (let k = 0; k < limit; k++) {
        prefixes++;
        const d = decodeFrame(f.linktype, f.data.subarray(0, k));
        const bad = d.layers.length > n || (d.layers.length < n && !d.truncated);
        if (bad) {
          problems++;
          if (problems < 20)
            t.fail(
              `${file} #${f.index} prefix ${k}: ${d.layers.length}/${n} layers, truncated ${d.truncated}`,
            );
        }
      }
    }
  }
  t.comment(`${prefixes} prefixes decoded`);
  t.equal(problems, 0);
  t.end();
});
