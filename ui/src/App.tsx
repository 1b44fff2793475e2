import { useCallback, useEffect, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { commands, type ConsoleStatus, type OperatorRights } from "./api";
import { ErrorNote, Loading } from "./components/Status";
import { SignIn } from "./views/SignIn";
import { Connect } from "./views/Connect";
import { MemoryBrowser } from "./views/MemoryBrowser";
import { EntryDetailView } from "./views/EntryDetail";
import { RetrievalEvents } from "./views/RetrievalEvents";
import { ExplainView } from "./views/Explain";
import { SharingQueue } from "./views/SharingQueue";
import { EvidenceReview } from "./views/EvidenceReview";
import { AccessTokens } from "./views/AccessTokens";

type EntryTab = "history" | "lineage";

export type View = "memory" | "events" | "explain" | "sharing" | "review" | "tokens";

const NAV: { view: View; label: string; key: string }[] = [
  { view: "memory", label: "Memory", key: "1" },
  { view: "events", label: "Retrieval events", key: "2" },
  { view: "explain", label: "Explain", key: "3" },
  { view: "sharing", label: "Sharing requests", key: "4" },
  { view: "review", label: "Evidence review", key: "5" },
  { view: "tokens", label: "Access tokens", key: "6" },
];

type Theme = "light" | "dark";

function initialTheme(): Theme {
  const saved = localStorage.getItem("mesh-theme");
  if (saved === "light" || saved === "dark") return saved;
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function useTheme(): [Theme, () => void] {
  const [theme, setTheme] = useState<Theme>(initialTheme);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("mesh-theme", theme);
  }, [theme]);
  return [theme, () => setTheme((t) => (t === "dark" ? "light" : "dark"))];
}

export function App() {
  const status = useQuery({ queryKey: ["status"], queryFn: () => commands.consoleStatus() });
  const [theme, toggleTheme] = useTheme();
  // The session the views were opened under: when the database stops accepting its role, the
  // views stay mounted (with everything typed into them) under a sign-in dialog.
  const [lastSession, setLastSession] = useState<OperatorRights | null>(null);
  const current = status.data?.session ?? null;
  useEffect(() => {
    if (current) setLastSession(current);
  }, [current]);

  if (status.isPending) return <Loading what="console" />;
  if (status.isError) return <ErrorNote error={status.error} onRetry={() => status.refetch()} />;
  if (status.data.database_error) {
    return (
      <main className="signin">
        <div className="card signin-card">
          <h1>Mesh Memory Console</h1>
          <ErrorNote error={status.data.database_error} />
          <p className="muted">
            DATABASE_URL names a database this console cannot open. Fix it, or start the console without
            DATABASE_URL to choose a connection.
          </p>
        </div>
      </main>
    );
  }
  if (!status.data.connected) return <Connect />;
  const shellSession = current ?? (status.data.session_ended ? lastSession : null);
  if (!shellSession) return <SignIn status={status.data} />;
  return (
    <>
      <Shell
        status={status.data}
        session={shellSession}
        theme={theme}
        toggleTheme={toggleTheme}
        onSignedOut={() => setLastSession(null)}
      />
      {!current && (
        <SignIn status={status.data} ended={status.data.session_ended} lastRole={shellSession.role} />
      )}
    </>
  );
}

function Shell({
  status,
  session,
  theme,
  toggleTheme,
  onSignedOut,
}: {
  status: ConsoleStatus;
  session: OperatorRights;
  theme: Theme;
  toggleTheme: () => void;
  onSignedOut: () => void;
}) {
  const queryClient = useQueryClient();
  const [view, setView] = useState<View>("memory");
  const [entryId, setEntryId] = useState<string | null>(null);
  const [entryTab, setEntryTab] = useState<EntryTab>("history");
  const signOut = useMutation({
    mutationFn: () => commands.signOut(),
    onSuccess: () => {
      onSignedOut();
      queryClient.invalidateQueries();
    },
  });
  // On a server the sign-in is part of the connection: signing out returns to the connection
  // screen (the demo and DATABASE_URL keep their database open for the next sign-in).
  const disconnect = useMutation({
    mutationFn: () => commands.disconnect(),
    onSuccess: () => {
      onSignedOut();
      queryClient.invalidateQueries();
    },
  });

  const openEntry = useCallback((id: string, tab: EntryTab = "history") => {
    setEntryId(id);
    setEntryTab(tab);
    setView("memory");
  }, []);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      const typing = target && ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName);
      if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
      const item = NAV.find((n) => n.key === event.key);
      if (item) {
        event.preventDefault();
        setView(item.view);
        if (item.view !== "memory") setEntryId(null);
      } else if (event.key === "Escape") {
        setEntryId(null);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  return (
    <div className="shell">
      <header className="topbar">
        <span className="brand">Mesh Memory Console</span>
        <span className="session" data-testid="session-role">
          Signed in as <strong>{session.role}</strong>
          {session.can_approve ? (
            <span className="badge ok">operator</span>
          ) : session.can_erase ? (
            <span className="badge ok">eraser</span>
          ) : (
            <span className="badge warn" title={session.limitation ?? undefined}>
              read-only
            </span>
          )}
        </span>
        <button
          type="button"
          className="ghost"
          onClick={toggleTheme}
          aria-label="Toggle light and dark theme"
          data-testid="theme-toggle"
        >
          {theme === "dark" ? "☀ Light" : "☾ Dark"}
        </button>
        <span className="muted database-label" data-testid="database-label">
          {status.database_label}
          {status.embedded ? " (demo)" : ""}
        </span>
        <button type="button" className="ghost" data-testid="sign-out" onClick={() => signOut.mutate()}>
          Sign out
        </button>
        {!status.scripted && (
          <button type="button" className="ghost" data-testid="disconnect" onClick={() => disconnect.mutate()}>
            Disconnect
          </button>
        )}
      </header>
      <nav className="sidebar" aria-label="Views">
        {NAV.map((n) => (
          <button
            key={n.view}
            type="button"
            className={n.view === view ? "nav active" : "nav"}
            aria-current={n.view === view ? "page" : undefined}
            data-testid={`nav-${n.view}`}
            onClick={() => {
              setView(n.view);
              if (n.view !== "memory") setEntryId(null);
            }}
          >
            <span>{n.label}</span>
            <kbd>{n.key}</kbd>
          </button>
        ))}
        <p className="hint">Keys 1–6 switch views, arrows move in lists, Enter opens, Esc closes.</p>
      </nav>
      <main className="content">
        {status.schema_notice && (
          <div className="notice" role="alert" data-testid="schema-banner">
            {status.schema_notice}
          </div>
        )}
        {!session.can_approve && session.limitation && view === "sharing" && (
          <div className="notice" role="note" data-testid="approve-limitation">
            {session.limitation}
          </div>
        )}
        {!session.can_review_evidence && session.limitation && view === "review" && (
          <div className="notice" role="note" data-testid="review-role-limitation">
            {session.limitation}
          </div>
        )}
        {view === "memory" &&
          (entryId ? (
            <EntryDetailView
              key={`${entryId}-${entryTab}`}
              entryId={entryId}
              session={session}
              initialTab={entryTab}
              onClose={() => setEntryId(null)}
              onOpenEntry={openEntry}
            />
          ) : (
            <MemoryBrowser onOpen={openEntry} />
          ))}
        {view === "events" && <RetrievalEvents onOpenEntry={openEntry} />}
        {view === "explain" && <ExplainView />}
        {view === "sharing" && <SharingQueue session={session} onOpenEntry={openEntry} />}
        {view === "review" && <EvidenceReview session={session} onOpenEntry={openEntry} />}
        {view === "tokens" && <AccessTokens session={session} />}
      </main>
    </div>
  );
}
