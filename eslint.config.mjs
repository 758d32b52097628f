// typescript-eslint strict-type-checked with exhaustive switches (STYLE.md).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'eslint.config.mjs', 'bin/**', '.tap/**'] },
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
  {
    files: ['agent/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/collector/**', '**/cli/**'],
              message: 'agent/ shares only proto/ and common/ with the collector',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['collector/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/agent/**', '**/cli/**'],
              message: 'collector/ shares only proto/ and common/ with the agent',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['test/**', 'lab/**', 'scripts/**', 'bench/**'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
