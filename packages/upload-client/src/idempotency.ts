import { randomUUID } from "node:crypto";

/** docs/integrations/http-upload.md: 1–255 visible ASCII characters (`!` to `~`). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** Why `key` cannot be an `Idempotency-Key`, or undefined when it can. */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (IDEMPOTENCY_KEY.test(key)) return undefined;
  if (key.length === 0) return "idempotency key must not be empty";
  if (key.length > 255) return `idempotency key must be at most 255 characters, got ${key.length}`;
  return `idempotency key must be visible ASCII characters (no spaces), got ${JSON.stringify(key)}`;
}

/** A fresh key for one upload; every retry of that upload sends the same one. */
export function generateIdempotencyKey(): string {
  return randomUUID();
}
