/**
 * The client frame mask of the collector link.
 *
 * RFC 6455 §5.3 has a client mask every frame with a fresh, unpredictable key. The key protects
 * cleartext intermediaries (transparent proxies, caches) from payloads crafted to look like HTTP
 * to them (the cache-poisoning attack of Huang et al., 2011). Inside TLS no intermediary reads
 * the frames, so the key buys nothing there, while masking costs a per-byte XOR — a JS loop in
 * ws 8 without its optional `bufferutil`. ws 8's Sender skips the XOR when the key is all zero
 * (sender.js `skipMasking`), and its Receiver skips unmasking likewise (receiver.js
 * `getData`), so a zero key removes the cost at both ends while the frames stay valid (the
 * MASK bit is set and the key is carried). Over plain `ws://` the random key is kept.
 */

/** Fills the key with zeros: ws then sends the payload unmasked-in-effect. */
export function zeroMask(mask: Buffer): void {
  mask.fill(0);
}

/** ws client options for the link's masking: a zero key only when the URL is TLS (`wss:`). */
export function maskOptionsFor(url: string): { generateMask?: (mask: Buffer) => void } {
  return isTLS(url) ? { generateMask: zeroMask } : {};
}

/** Whether the link URL runs over TLS, where intermediaries cannot read the frames. */
export function isTLS(url: string): boolean {
  try {
    return new URL(url).protocol === 'wss:';
  } catch {
    return false;
  }
}
