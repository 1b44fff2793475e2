import { errorMessage } from "../api";

/** A visible, announced loading state. */
export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> Loading {what}…
    </div>
  );
}

/** A visible, announced error with an optional retry. */
export function ErrorNote({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  return (
    <div className="error" role="alert">
      <strong>Error:</strong> {errorMessage(error)}
      {onRetry && (
        <button type="button" className="link" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}

/** Shown when a list is empty, saying so rather than showing nothing. */
export function Empty({ children }: { children: React.ReactNode }) {
  return <p className="empty">{children}</p>;
}
