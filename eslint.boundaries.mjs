// What may import what (ARCHITECTURE.md). One table, turned into no-restricted-imports blocks;
// test/unit/layout.test.ts checks that an import across it fails the lint.

/** Our top-level folders that hold code. */
const FOLDERS = [
  'core',
  'common',
  'native',
  'offline',
  'agent',
  'collector',
  'cli',
  'lab',
  'bench',
  'scripts',
  'test',
];

/** For each folder: the folders it may import (itself always), and what else it may not use. */
export const ALLOWED = {
  core: ['common'],
  common: [],
  native: [],
  offline: ['core', 'common', 'native'],
  agent: ['core', 'common', 'native', 'offline'],
  collector: ['core', 'common'],
  // The composition root: the agent and the collector through their index.ts only.
  cli: ['core', 'common', 'native', 'offline', 'lab', 'agent/index', 'collector/index'],
  lab: ['core', 'common', 'native', 'offline', 'agent/index', 'collector/index'],
  bench: ['core', 'common', 'native', 'offline', 'lab', 'agent/index', 'collector/index'],
  scripts: ['core', 'common', 'native', 'offline', 'lab', 'agent/index', 'collector/index'],
};

/** Node and npm modules that do I/O or keep time: never in the pure engine. */
const IO_MODULES = [
  'node:*',
  'fs',
  'fs/*',
  'net',
  'http',
  'https',
  'http2',
  'dgram',
  'tls',
  'child_process',
  'worker_threads',
  'timers',
  'timers/*',
  'os',
  'path',
  'readline',
  'process',
  'cluster',
  'ws',
  'pino',
  'cap',
  'pcap-parser',
  '@kubernetes/*',
];
/**
 * common/ modules that read files (the token, the .proto, inventory files, package.json) or the
 * process, hash with node:crypto (a bundle's SHA256SUMS: the shells hash, core is handed data), or
 * send HTTP requests (stream-request: the collector's and the plugin's transport).
 */
const COMMON_IO = [
  '**/common/auth',
  '**/common/codec',
  '**/common/inventory-file',
  '**/common/sha256sums',
  '**/common/stream-request',
  '**/common/version',
];

function blockFor(folder) {
  const allowed = ALLOWED[folder];
  const group = [];
  for (const f of FOLDERS) {
    if (f === folder) continue;
    if (allowed.includes(f)) continue;
    const viaIndex = allowed.includes(`${f}/index`);
    // `../agent` is the folder's index.ts; `../agent/main` and deeper are its insides.
    group.push(`**/${f}/**`);
    if (viaIndex) group.push(`!**/${f}/index`);
    else group.push(`**/${f}`);
  }
  const patterns = [
    {
      group,
      message:
        `${folder}/ may import only ${allowed.length === 0 ? 'itself' : allowed.join(', ')}` +
        ' (ARCHITECTURE.md, "What may import what")',
    },
  ];
  if (folder === 'core') {
    patterns.push({
      group: IO_MODULES,
      message: 'core/ is pure: no I/O, timers or clocks; use a shell',
    });
    patterns.push({ group: COMMON_IO, message: 'core/ is pure: this common/ module reads files' });
  }
  return { files: [`${folder}/**`], rules: { 'no-restricted-imports': ['error', { patterns }] } };
}

/** The clock and the timers, which core/ receives as values instead. */
const CORE_GLOBALS = {
  files: ['core/**'],
  rules: {
    'no-restricted-globals': [
      'error',
      ...[
        'setTimeout',
        'setInterval',
        'setImmediate',
        'clearTimeout',
        'clearInterval',
        'process',
        'performance',
        'console',
      ].map((name) => ({
        name,
        message: 'core/ is pure: the shell owns timers, the clock, the process and logging',
      })),
    ],
    'no-restricted-properties': [
      'error',
      { object: 'Date', property: 'now', message: 'core/ is pure: the clock is passed in' },
    ],
    'no-restricted-syntax': [
      'error',
      {
        selector: "NewExpression[callee.name='Date'][arguments.length=0]",
        message: 'core/ is pure: the clock is passed in',
      },
    ],
  },
};

export function boundaries() {
  return [...Object.keys(ALLOWED).map(blockFor), CORE_GLOBALS];
}
