/**
 * core/report/md-escape.ts: a name report.md takes from outside reads back as that name — a code
 * span whose fence outruns every backtick run inside (CommonMark §6.1), a table cell with no
 * unescaped pipe and no HTML, and one line wherever it held a line break.
 */
import t from 'tap';
import { mdCode, mdFence, mdLine, mdText } from '../../core/report/md-escape';

void t.test('mdCode: a fence longer than any backtick run inside, padded where it must be', (t) => {
  const cases: [string, string, string][] = [
    ['/tmp/decap.pcap', '`/tmp/decap.pcap`', 'plain'],
    ['a`b.pcap', '``a`b.pcap``', 'one backtick: a fence of two'],
    ['e`g``ress.pcap', '```e`g``ress.pcap```', 'a run of two: a fence of three'],
    ['`x', '`` `x ``', 'starts with a backtick: padded'],
    ['x`', '`` x` ``', 'ends with a backtick: padded'],
    [' a ', '`  a  `', 'a space on both sides: one more each (one is stripped)'],
    ['a\nb\r\nc\rd', '`a\u2424b\u2424c\u2424d`', 'line breaks shown as ␤: the list item stays one'],
    ['<i>x&amp;', '`<i>x&amp;`', 'a code span is literal: nothing to escape'],
  ];
  for (const [input, want, why] of cases) t.equal(mdCode(input), want, why);
  t.end();
});

void t.test('mdText: plain text that cannot end a cell, open a span or render HTML', (t) => {
  const cases: [string, string, string][] = [
    ['a|b <i>x&amp;.pcap', 'a\\|b &lt;i&gt;x&amp;amp;.pcap', "the reviewer's file name"],
    ['a\\|b', 'a\\\\\\|b', 'a backslash before a pipe cannot escape the escape'],
    ['n`1', 'n\\`1', 'a backtick opens no code span'],
    ['[x](http://e)', '\\[x\\](http://e)', 'no link'],
    ['vpn\nnode', 'vpn\u2424node', 'one line'],
    ['rp_filter *x*', 'rp_filter *x*', 'emphasis marks are left (they only emphasise)'],
  ];
  for (const [input, want, why] of cases) t.equal(mdText(input), want, why);
  t.end();
});

void t.test('mdFence and mdLine', (t) => {
  t.same(mdFence('sh', 'echo hi'), ['```sh', 'echo hi', '```']);
  t.same(
    mdFence('sh', "hoptrace analyze --point 'a=x````.pcap'"),
    ['`````sh', "hoptrace analyze --point 'a=x````.pcap'", '`````'],
    'no line of the body closes the block',
  );
  t.equal(mdLine('see `x`\nthen'), 'see `x`\u2424then', 'Markdown kept, on one line');
  t.end();
});
