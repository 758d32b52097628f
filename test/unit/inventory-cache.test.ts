/**
 * The agent's inventory cache (agent/netns/inventory-cache.ts): a namespace is read when new, at
 * every refresh while young, then once a STALE_MS; a namespace gone is forgotten.
 */
import t from 'tap';
import { InventoryCache, STALE_MS, YOUNG_MS } from '../../agent/netns/inventory-cache';

void t.test('new, young, settled, stale, gone', (t) => {
  const c = new InventoryCache<string[]>();
  t.equal(c.fresh('a', 0), undefined, 'new: read it');
  c.put('a', ['10.0.0.1'], 0);
  t.equal(c.fresh('a', 5_000), undefined, 'young: read again at each refresh');
  c.put('a', ['10.0.0.1'], YOUNG_MS);
  t.same(c.fresh('a', YOUNG_MS + 5_000), ['10.0.0.1'], 'settled: the cached read');
  t.same(c.fresh('a', YOUNG_MS + STALE_MS - 1), ['10.0.0.1'], 'until it is stale');
  t.equal(c.fresh('a', YOUNG_MS + STALE_MS), undefined, 'stale: read again');
  c.put('a', ['10.0.0.2'], YOUNG_MS + STALE_MS);
  t.same(c.fresh('a', YOUNG_MS + STALE_MS + 1), ['10.0.0.2'], 'the new read, first seen kept');
  c.put('b', [], 0);
  c.retain(new Set(['b']));
  t.equal(c.size, 1, 'a namespace gone is forgotten');
  t.equal(c.fresh('a', YOUNG_MS + STALE_MS + 1), undefined, 'and read as new if it comes back');
  t.end();
});
