// Errors are values: core functions and Durable Object RPC methods return Result<T, E> where E is
// a discriminated union on `code`. Nothing here throws across a stub.
export type Ok<T> = { ok: true; value: T };
export type Err<E> = { ok: false; error: E };
export type Result<T, E> = Ok<T> | Err<E>;

export const ok = <T>(value: T): Ok<T> => ({ ok: true, value });
export const err = <E>(error: E): Err<E> => ({ ok: false, error });
