import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "out/", ".e2e/", "node_modules/"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-floating-promises": "off",
      eqeqeq: ["error", "smart"],
    },
  },
);
