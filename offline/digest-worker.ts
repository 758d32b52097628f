/**
 * The worker thread of offline/digest-pool.ts: claims the next file from the shared counter,
 * hashes it (file-digest.ts) and posts the digest, until none is left. A file it cannot read gets
 * no answer: the main thread hashes that one again and throws its error.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { fileDigest } from './file-digest';
import type { DigestMessage } from './digest-pool';

const { files, claim, port } = workerData as {
  files: string[];
  claim: Int32Array;
  port: MessagePort;
};

for (;;) {
  const i = Atomics.add(claim, 0, 1);
  const file = files[i];
  if (file === undefined) break;
  let message: DigestMessage | null = null;
  try {
    message = { i, digest: fileDigest(file) };
  } catch {
    // unanswered: hashed again on the main thread, which throws the error
  }
  if (message !== null) port.postMessage(message);
}
port.close();
