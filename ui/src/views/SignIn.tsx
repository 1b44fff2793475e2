import { useState } from "react";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { commands, type ConsoleStatus } from "../api";
import { ErrorNote } from "../components/Status";

/**
 * Sign-in with the operator's own PostgreSQL login role. On the embedded database's first run
 * (no operator role yet) the same form creates the operator role, then signs in. When a session
 * ended under the operator (`ended`), it is a dialog over the views, which keep what was typed.
 */
export function SignIn({ status, ended, lastRole }: { status: ConsoleStatus; ended?: string | null; lastRole?: string }) {
  const queryClient = useQueryClient();
  const firstRun = status.needs_first_operator && !ended;
  const [role, setRole] = useState(lastRole ?? "");
  const [password, setPassword] = useState("");
  const [confirm, setConfirm] = useState("");
  const mismatch = firstRun && confirm.length > 0 && password !== confirm;

  // Back to the connection screen (closes the demo database this console opened).
  const disconnect = useMutation({
    mutationFn: () => commands.disconnect(),
    onSuccess: () => queryClient.invalidateQueries(),
  });
  const signIn = useMutation({
    mutationFn: () =>
      firstRun ? commands.createFirstOperator(role.trim(), password) : commands.signIn(role.trim(), password),
    onSuccess: () => {
      setPassword("");
      setConfirm("");
      queryClient.invalidateQueries();
    },
  });

  return (
    <main
      className={ended ? "signin signin-over" : "signin"}
      role={ended ? "dialog" : undefined}
      aria-modal={ended ? true : undefined}
      aria-label={ended ? "Session ended" : undefined}
    >
      <form
        className="card signin-card"
        aria-label={firstRun ? "Create operator role" : "Sign in"}
        onSubmit={(e) => {
          e.preventDefault();
          if (!mismatch) signIn.mutate();
        }}
      >
        <h1>Mesh Memory Console</h1>
        <p className="muted">
          Database: <code>{status.database_label}</code> {status.embedded ? "(embedded)" : ""}
        </p>
        {ended && (
          <p className="notice" role="alert" data-testid="session-ended">
            {ended}
          </p>
        )}
        {firstRun ? (
          <p>
            First run: create your <strong>operator role</strong>. It is a PostgreSQL login role in the
            <code> mesh_operator</code> group; every approval you make is recorded under this name. The password
            is stored only as a SCRAM verifier.
          </p>
        ) : (
          <p>Sign in with your own PostgreSQL login role.</p>
        )}
        <label>
          Role name
          <input
            name="role"
            autoComplete="username"
            autoFocus
            required
            value={role}
            onChange={(e) => setRole(e.target.value)}
            placeholder="e.g. alice_ops"
          />
        </label>
        <label>
          Password
          <input
            name="password"
            type="password"
            autoComplete={firstRun ? "new-password" : "current-password"}
            required
            minLength={firstRun ? 12 : undefined}
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </label>
        {firstRun && (
          <label>
            Repeat password
            <input
              name="confirm"
              type="password"
              autoComplete="new-password"
              required
              value={confirm}
              onChange={(e) => setConfirm(e.target.value)}
              aria-invalid={mismatch}
            />
          </label>
        )}
        {mismatch && <p className="error" role="alert">The passwords differ.</p>}
        {signIn.isError && <ErrorNote error={signIn.error} />}
        <button type="submit" className="primary" disabled={signIn.isPending || mismatch}>
          {signIn.isPending ? "Signing in…" : firstRun ? "Create role and sign in" : "Sign in"}
        </button>
        {!status.scripted && !ended && (
          <button
            type="button"
            className="link"
            data-testid="back-to-connections"
            disabled={disconnect.isPending}
            onClick={() => disconnect.mutate()}
          >
            Choose another database
          </button>
        )}
      </form>
    </main>
  );
}
