// ESLint: limits the code keeps, run by npm test (test/guards/lint.test.ts). Syntax only, no
// type information: types are tsc's (npm test builds first), and a typed lint would cost the
// suite a minute of CPU.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/generated/**', 'node_modules/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser },
    rules: {
      // Past six, a call site cannot be read without the signature: pass an object (its fields named).
      'max-params': ['error', 6],
    },
  },
  {
    // A test's describe() holds its tests: long by nature. The product's functions and the benches' are not.
    files: ['services/**/*.ts', 'bench/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }],
    },
  },
);
