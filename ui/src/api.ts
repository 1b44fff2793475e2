// One place that talks to the command layer. Views call `commands` (generated bindings) through
// TanStack Query; errors thrown by commands are ConsoleError values ({ kind, message }) or, for
// framework failures, plain strings.
import type { ConsoleError } from "./bindings";

export { commands } from "./bindings";
export type * from "./bindings";

/** The message to show for anything a command threw. */
export function errorMessage(error: unknown): string {
  if (typeof error === "string") return error;
  if (error && typeof error === "object" && "message" in error) {
    return String((error as ConsoleError).message);
  }
  return "Unexpected error";
}

/** Whether the error means the session is gone (the app returns to sign-in). */
export function isSignedOut(error: unknown): boolean {
  return !!error && typeof error === "object" && (error as ConsoleError).kind === "not_signed_in";
}

/** Whether a command failed in the database (unreachable, or a connection it ended). */
export function isDatabaseError(error: unknown): boolean {
  return !!error && typeof error === "object" && (error as ConsoleError).kind === "database";
}

/**
 * Short, stable display of a UUID: its last 12 hex digits, which is how models see an entry
 * (`[5c06e1f2a9b3 rev 2] ...` in prompts and recall results), so an operator can match a prompt
 * line to an entry by eye. (The leading digits of a version 7 id are its timestamp and barely
 * differ between ids made close together.)
 */
export function shortId(id: string): string {
  return id.length > 13 ? `…${id.slice(-12)}` : id;
}

/** Local date-time for RFC 3339 strings. */
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

/**
 * The day a memory was told, as the memory line writes it for models: `8 May 2023` (UTC, month
 * in words), so the console and the prompt say the same day.
 */
export function toldOn(rfc3339: string | null | undefined): string {
  if (!rfc3339) return "—";
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return rfc3339;
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

export function when(rfc3339: string | null | undefined): string {
  if (!rfc3339) return "—";
  const d = new Date(rfc3339);
  return Number.isNaN(d.getTime()) ? rfc3339 : d.toLocaleString();
}

/** Who erased a revision or message, when and why: "erased by <role> on <date>: <reason>". */
export function erasureNote(note: { erased_by: string; erased_on: string; reason: string }): string {
  return `erased by ${note.erased_by} on ${note.erased_on}: ${note.reason}`;
}
