import { describe, expect, it } from "vitest";
import { isUnavailable } from "../src/errors.js";

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("isUnavailable", () => {
  it("takes a database that is away, overloaded or blocked for unavailable", () => {
    expect(isUnavailable(withCode("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"))).toBe(
      true,
    );
    expect(isUnavailable(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(
      isUnavailable(
        new Error("Connection terminated due to connection timeout", {
          cause: new Error("Connection terminated unexpectedly"),
        }),
      ),
    ).toBe(true);
    expect(isUnavailable(new Error("timeout exceeded when trying to connect"))).toBe(true);
    expect(isUnavailable(withCode("the database system is starting up", "57P03"))).toBe(true);
    expect(isUnavailable(withCode("terminating connection due to administrator", "57P01"))).toBe(
      true,
    );
    expect(isUnavailable(withCode("canceling statement due to lock timeout", "55P03"))).toBe(true);
    expect(isUnavailable(withCode("sorry, too many clients already", "53300"))).toBe(true);
    expect(isUnavailable(withCode("connection failure", "08006"))).toBe(true);
    expect(
      isUnavailable(
        new AggregateError([withCode("connect ECONNREFUSED ::1:5432", "ECONNREFUSED")]),
      ),
    ).toBe(true);
  });

  it("takes a fault of the call itself for a failure", () => {
    expect(isUnavailable(withCode('relation "x" does not exist', "42P01"))).toBe(false);
    expect(isUnavailable(withCode("syntax error at or near", "42601"))).toBe(false);
    expect(isUnavailable(withCode("duplicate key value", "23505"))).toBe(false);
    expect(isUnavailable(new TypeError("Cannot read properties of undefined"))).toBe(false);
    expect(isUnavailable(new Error("Cannot use a pool after calling end on the pool"))).toBe(false);
    expect(isUnavailable("ECONNREFUSED")).toBe(false);
  });
});
