import { Transform, type TransformCallback } from "node:stream";
import { FileHasher } from "@distributor/bundle";

/** A copied source file whose bytes no longer match its manifest entry. */
export class SourceChangedError extends Error {
  override readonly name = "SourceChangedError";
}

/**
 * Passes bytes through while hashing them, and fails the stream when they differ from what the
 * manifest promised — so a source modified after validation never lands at a destination.
 */
export class VerifyingStream extends Transform {
  readonly #hasher = new FileHasher();

  constructor(
    readonly path: string,
    readonly expectedSha256: string,
    readonly expectedSize: number,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hasher.update(chunk);
    if (this.#hasher.size > this.expectedSize) {
      callback(
        new SourceChangedError(
          `${this.path}: source changed while copying: more than the ${this.expectedSize} bytes listed in the manifest`,
        ),
      );
      return;
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    const { sha256, size } = this.#hasher.digest();
    if (size !== this.expectedSize) {
      callback(
        new SourceChangedError(
          `${this.path}: source changed while copying: size mismatch: expected ${this.expectedSize}, got ${size}`,
        ),
      );
      return;
    }
    if (sha256 !== this.expectedSha256) {
      callback(
        new SourceChangedError(
          `${this.path}: source changed while copying: sha256 mismatch: expected ${this.expectedSha256}, got ${sha256}`,
        ),
      );
      return;
    }
    callback();
  }
}
