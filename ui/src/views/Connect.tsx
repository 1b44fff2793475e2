import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { commands, errorMessage, type ServerConnection, type TlsMode } from "../api";

const TLS_MODES: { mode: TlsMode; label: string }[] = [
  { mode: "verify-full", label: "verify-full — check the CA and the host name (recommended)" },
  { mode: "verify-ca", label: "verify-ca — check the CA only" },
  { mode: "require", label: "require — encrypt, do not check the certificate" },
  { mode: "prefer", label: "prefer — encrypt if the server offers it" },
  { mode: "disable", label: "disable — no TLS (this machine only)" },
];

const EMPTY: ServerConnection = {
  host: "",
  port: 5432,
  database: "mesh_memory",
  tls: "verify-full",
  ca_file: null,
  role: "",
};

/**
 * The first screen without DATABASE_URL: the local demo (the embedded PostgreSQL with demo data),
 * or a PostgreSQL server reached as the person's own login role. Saved connections fill the form;
 * they never hold a password, which is asked for at every sign-in.
 */
export function Connect() {
  const queryClient = useQueryClient();
  const saved = useQuery({ queryKey: ["saved-connections"], queryFn: () => commands.savedConnections() });
  const [form, setForm] = useState<ServerConnection>(EMPTY);
  const [password, setPassword] = useState("");
  const [remember, setRemember] = useState(true);

  const demo = useMutation({
    mutationFn: () => commands.connectDemo(),
    onSuccess: () => queryClient.invalidateQueries(),
  });
  const server = useMutation({
    mutationFn: () =>
      commands.connectServer(
        { ...form, host: form.host.trim(), role: form.role.trim(), ca_file: form.ca_file?.trim() || null },
        password,
        remember,
      ),
    onSuccess: () => {
      setPassword("");
      queryClient.invalidateQueries();
    },
  });
  const forget = useMutation({
    mutationFn: (connection: ServerConnection) => commands.forgetConnection(connection),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["saved-connections"] }),
  });
  const busy = demo.isPending || server.isPending;
  const set = <K extends keyof ServerConnection>(key: K, value: ServerConnection[K]) =>
    setForm((f) => ({ ...f, [key]: value }));
  const failure = server.error ?? demo.error;

  return (
    <main className="signin" data-testid="connection-screen">
      <div className="card signin-card connect-card">
        <h1>Mesh Memory Console</h1>
        <section aria-labelledby="demo-title">
          <h2 id="demo-title">Local demo</h2>
          <p className="muted">A private PostgreSQL on this computer with demo memory, to try the console.</p>
          <button type="button" data-testid="connect-demo" disabled={busy} onClick={() => demo.mutate()}>
            {demo.isPending ? "Starting the demo database…" : "Open the local demo"}
          </button>
        </section>
        {(saved.data?.length ?? 0) > 0 && (
          <section aria-labelledby="saved-title">
            <h2 id="saved-title">Saved connections</h2>
            <ul className="saved-connections" data-testid="saved-connections">
              {saved.data?.map((c) => (
                <li key={`${c.role}@${c.host}:${c.port}/${c.database}`}>
                  <button type="button" className="link" onClick={() => setForm(c)}>
                    {c.role}@{c.host}:{c.port}/{c.database} ({c.tls})
                  </button>
                  <button
                    type="button"
                    className="ghost"
                    aria-label={`Forget ${c.role}@${c.host}`}
                    onClick={() => forget.mutate(c)}
                  >
                    Forget
                  </button>
                </li>
              ))}
            </ul>
          </section>
        )}
        <form
          aria-label="Connect to a server"
          onSubmit={(e) => {
            e.preventDefault();
            server.mutate();
          }}
        >
          <h2>PostgreSQL server</h2>
          <p className="muted">Sign in with your own login role; ask your administrator for one.</p>
          <div className="connect-row">
            <label className="grow">
              Host
              <input
                id="conn-host"
                required
                value={form.host}
                onChange={(e) => set("host", e.target.value)}
                placeholder="db.example.com"
              />
            </label>
            <label className="port">
              Port
              <input
                id="conn-port"
                type="number"
                min={1}
                max={65535}
                required
                value={form.port}
                onChange={(e) => set("port", Number(e.target.value))}
              />
            </label>
          </div>
          <label>
            Database
            <input id="conn-database" required value={form.database} onChange={(e) => set("database", e.target.value)} />
          </label>
          <label>
            TLS
            <select id="conn-sslmode" value={form.tls} onChange={(e) => set("tls", e.target.value as TlsMode)}>
              {TLS_MODES.map((m) => (
                <option key={m.mode} value={m.mode}>
                  {m.label}
                </option>
              ))}
            </select>
          </label>
          <label>
            CA certificate file (PEM; empty: the system&apos;s trusted CAs)
            <input
              id="conn-sslrootcert"
              value={form.ca_file ?? ""}
              onChange={(e) => set("ca_file", e.target.value)}
              placeholder="/etc/ssl/certs/company-ca.pem"
            />
          </label>
          <label>
            Role
            <input
              id="conn-role"
              autoComplete="username"
              required
              value={form.role}
              onChange={(e) => set("role", e.target.value)}
              placeholder="e.g. alice_ops"
            />
          </label>
          <label>
            Password
            <input
              id="conn-password"
              type="password"
              autoComplete="current-password"
              required
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          </label>
          <label className="inline">
            <input type="checkbox" checked={remember} onChange={(e) => setRemember(e.target.checked)} />
            Remember this connection (never the password)
          </label>
          {failure && (
            <p className="notice error" role="alert" data-testid="connection-error">
              {errorMessage(failure)}
            </p>
          )}
          <button type="submit" className="primary" data-testid="connect-server" disabled={busy}>
            {server.isPending ? "Connecting…" : "Connect and sign in"}
          </button>
        </form>
      </div>
    </main>
  );
}
