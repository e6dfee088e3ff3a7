/**
 * The SSH wire encoding (RFC 4251 §5) as SSHSIG blobs and public keys use it: big-endian `uint32`,
 * length-prefixed `string`, and `mpint` (two's complement, minimal). Reading past the end or a
 * malformed value throws `SshWireError`; callers turn it into the issue they report.
 */

export class SshWireError extends Error {
  override name = "SshWireError";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

export class SshReader {
  #offset = 0;

  constructor(private readonly bytes: Uint8Array) {}

  get remaining(): number {
    return this.bytes.length - this.#offset;
  }

  raw(length: number, what: string): Uint8Array {
    if (length > this.remaining) throw new SshWireError(`${what} runs past the end of the data`);
    const value = this.bytes.subarray(this.#offset, this.#offset + length);
    this.#offset += length;
    return value;
  }

  uint32(what: string): number {
    const bytes = this.raw(4, what);
    return ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  }

  string(what: string): Uint8Array {
    return this.raw(this.uint32(what), what);
  }

  /** A string that must be UTF-8 text (names, namespaces, algorithms). */
  text(what: string): string {
    try {
      return utf8.decode(this.string(what));
    } catch (error) {
      if (error instanceof SshWireError) throw error;
      throw new SshWireError(`${what} is not UTF-8 text`);
    }
  }

  /** A non-negative `mpint` as its unsigned big-endian magnitude without leading zeros. */
  unsignedMpint(what: string): Uint8Array {
    const bytes = this.string(what);
    if (bytes.length === 0) return bytes;
    if ((bytes[0]! & 0x80) !== 0) throw new SshWireError(`${what} is negative`);
    if (bytes[0] === 0) {
      // The one zero byte an mpint may lead with keeps a set high bit positive.
      if (bytes.length === 1 || (bytes[1]! & 0x80) === 0) {
        throw new SshWireError(`${what} has superfluous leading zero bytes`);
      }
      return bytes.subarray(1);
    }
    return bytes;
  }

  /** Fails unless every byte was read: SSH structures carry no trailing data. */
  end(what: string): void {
    if (this.remaining !== 0) throw new SshWireError(`${what} has trailing data`);
  }
}

/** Concatenates SSH wire values: a `string` for each byte array or text, raw bytes for `raw`. */
export function sshStrings(values: readonly (Uint8Array | string)[]): Uint8Array {
  const encoded = values.map((value) =>
    typeof value === "string" ? new TextEncoder().encode(value) : value,
  );
  const out = new Uint8Array(encoded.reduce((sum, value) => sum + 4 + value.length, 0));
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const value of encoded) {
    view.setUint32(offset, value.length);
    out.set(value, offset + 4);
    offset += 4 + value.length;
  }
  return out;
}
