/** Bounds are programming errors when malformed, so they throw `RangeError`, not `StorageError`. */
export function checkCount(name: string, value: number | undefined, required = false): void {
  if (value === undefined && !required) return;
  if (value === undefined || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${String(value)}`);
  }
}
