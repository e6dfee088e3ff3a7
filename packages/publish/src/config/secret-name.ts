/**
 * A secret reference names both an environment variable and a file in `secrets.directory`, so it
 * must be valid as either; this also keeps a reference from escaping the directory.
 */
export const SECRET_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isSecretName(name: string): boolean {
  return SECRET_NAME_PATTERN.test(name);
}
