// ESLint for Lightwell (STYLE.md §8): typescript-eslint's strictTypeChecked with type information
// from tsconfig.json, exhaustive switches, `node:` imports, and process.exit only in bin/.
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';
import n from 'eslint-plugin-n';

export default defineConfig(
  globalIgnores(['dist/', 'node_modules/', 'docs/', 'coverage/', '.tap/', 'tmp/', 'data/']),
  {
    files: ['{src,bin,bench,test}/**/*.{ts,tsx}'],
    extends: [tseslint.configs.strictTypeChecked],
    plugins: { n },
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      'n/prefer-node-protocol': 'error',
      'n/no-process-exit': 'error',
      // Limits, sizes and counts go into messages as numbers; their formatting is well defined.
      // The other options repeat strictTypeChecked's, which naming any option would reset.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        {
          allowAny: false,
          allowBoolean: false,
          allowNever: false,
          allowNullish: false,
          allowNumber: true,
          allowRegExp: false,
        },
      ],
      // `() => this.fail(error)` callbacks and `return send(res, …)` in void functions are
      // idioms here; neither uses the void value.
      '@typescript-eslint/no-confusing-void-expression': [
        'error',
        { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true },
      ],
      // `while (true)` with breaks inside is as plain as `for (;;)`, which the rule accepts.
      '@typescript-eslint/no-unnecessary-condition': [
        'error',
        { allowConstantLoopConditions: 'only-allowed-literals' },
      ],
      // As tsc's noUnusedLocals: a leading underscore marks a name left unused on purpose.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['bin/**/*.ts'],
    rules: { 'n/no-process-exit': 'off' },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // tap queues a subtest and reports its failures; t.test's promise is only for ordering.
          allowForKnownSafeCalls: [{ from: 'package', package: '@tapjs/test', name: 'test' }],
        },
      ],
      // Subtest callbacks are written `async (t) =>` throughout; tap awaits whatever they return.
      '@typescript-eslint/require-await': 'off',
      // Tests index fixtures they built a line earlier; a missing entry fails the test anyway.
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
