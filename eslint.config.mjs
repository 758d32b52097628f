// typescript-eslint strict-type-checked with exhaustive switches (STYLE.md).
import tseslint from 'typescript-eslint';
import { boundaries } from './eslint.boundaries.mjs';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'eslint.config.mjs',
      'eslint.boundaries.mjs',
      'bin/**',
      '.tap/**',
    ],
  },
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true },
      ],
      '@typescript-eslint/no-unnecessary-condition': [
        'error',
        { allowConstantLoopConditions: true },
      ],
      'no-restricted-imports': ['error', { patterns: [] }],
    },
  },
  // The layering (ARCHITECTURE.md, "What may import what"): core/ is the pure engine, common/ the
  // shared types; agent/, collector/ and cli/ are shells around them and never reach into each
  // other; the others meet the agent and the collector only through their index.ts.
  ...boundaries(),
  {
    files: ['test/**', 'lab/**', 'scripts/**', 'bench/**'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
