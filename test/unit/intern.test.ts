import t from 'tap';
import { StringInterner } from '../../common/intern';

void t.test('one copy of each string, at most `max` kept', (t) => {
  const s = new StringInterner(2);
  const a = s.of(['10.0.0', '1'].join('.'));
  t.equal(s.of('10.0.0.1'), a, 'the same string gives the kept copy');
  s.of('b');
  s.of('c');
  t.equal(s.size, 2, 'past the bound new strings are not kept');
  t.equal(s.of('c'), 'c', 'and are given back as they are');
  s.clear();
  t.equal(s.size, 0, 'clear() forgets them');
  s.of('c');
  t.equal(s.size, 1, 'and makes room again');
  t.end();
});
