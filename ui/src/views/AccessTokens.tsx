import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { ColumnDef } from "@tanstack/react-table";
import {
  commands,
  errorMessage,
  shortId,
  when,
  type AccessTokenRow,
  type OperatorRights,
  type TokenRevocation,
} from "../api";
import { DataTable } from "../components/DataTable";
import { Empty, ErrorNote, Loading } from "../components/Status";
import { ReasonField } from "../components/ReasonField";

/** The conversation as operators know it: its title, else its channel id. */
function conversationName(token: AccessTokenRow): string {
  return token.conversation_title || token.conversation;
}

/** Whether a token's expiry has passed (it then gets 401, as a revoked one does). */
function expired(token: AccessTokenRow): boolean {
  return token.expires_at !== null && new Date(token.expires_at).getTime() <= Date.now();
}

/** A token's state: live, revoked and when, or expired and when. */
function TokenState({ token }: { token: AccessTokenRow }) {
  if (!token.revoked_at && token.expires_at && expired(token)) {
    return (
      <span data-testid="token-state">
        <span className="badge danger">expired</span> {when(token.expires_at)}
      </span>
    );
  }
  return token.revoked_at ? (
    <span data-testid="token-state">
      <span className="badge danger">revoked</span> {when(token.revoked_at)}
    </span>
  ) : (
    <span data-testid="token-state">
      <span className="badge ok">live</span>
    </span>
  );
}

const columns: ColumnDef<AccessTokenRow, unknown>[] = [
  { header: "Label", accessorKey: "label", cell: (c) => (c.getValue() as string) || <em className="muted">none</em> },
  { header: "Agent", accessorKey: "agent_name" },
  {
    header: "Conversation",
    id: "conversation",
    cell: (c) => (
      <>
        {conversationName(c.row.original)} <code className="muted">{c.row.original.conversation}</code>
      </>
    ),
  },
  { header: "Speaks as", accessorKey: "speaker_label" },
  { header: "Created", accessorKey: "created_at", cell: (c) => when(c.getValue() as string) },
  {
    header: "Last used",
    accessorKey: "last_used_at",
    cell: (c) => ((c.getValue() as string | null) ? when(c.getValue() as string) : <em className="muted">never</em>),
  },
  { header: "Revoked", id: "revoked", cell: (c) => <TokenState token={c.row.original} /> },
];

/** Why this session may not revoke tokens, or `null` when it may. */
export function revokeBlocked(session: OperatorRights): string | null {
  return session.can_revoke_tokens ? null : (session.limitation ?? "This role may not revoke access tokens.");
}

/** A revocation the database refused; nothing was written. */
export type Refusal = { tokenId: string; message: string };

/** One token opened: its binding and, while it is live, the revocation with a required reason. */
function TokenPanel({
  token,
  session,
  onRevoked,
  onRefused,
}: {
  token: AccessTokenRow;
  session: OperatorRights;
  onRevoked: (revocation: TokenRevocation) => void;
  onRefused: (refusal: Refusal) => void;
}) {
  const queryClient = useQueryClient();
  const [reason, setReason] = useState("");
  const revoke = useMutation({
    mutationFn: () => commands.revokeAccessToken(token.id, reason.trim()),
    onSuccess: (revocation) => {
      onRevoked(revocation);
      queryClient.invalidateQueries({ queryKey: ["tokens"] });
    },
    // A refusal may mean the list is out of date (revoked elsewhere): it is shown above the
    // list, since this form leaves once the refreshed list shows the token revoked.
    onError: (error) => {
      onRefused({ tokenId: token.id, message: errorMessage(error) });
      queryClient.invalidateQueries({ queryKey: ["tokens"] });
    },
  });
  const blocked = revokeBlocked(session);
  const locked = !!blocked || revoke.isPending;
  const reasonId = `revoke-reason-${token.id}`;
  return (
    <article className="card" data-testid={`token-panel-${token.id}`} aria-label={`Access token ${shortId(token.id)}`}>
      <header>
        <strong>{token.label || `Token ${shortId(token.id)}`}</strong>{" "}
        {token.revoked_at ? <span className="badge danger">revoked</span> : <span className="badge ok">live</span>}
      </header>
      <dl className="facts">
        <dt>Token</dt>
        <dd>
          <code>{token.id}</code>
        </dd>
        <dt>Speaks as</dt>
        <dd>
          {token.speaker_label}
          {token.speaker_label.includes(token.speaker) ? "" : ` (connector id ${token.speaker})`} in{" "}
          {conversationName(token)}, memory of {token.agent_name}
        </dd>
        <dt>Created</dt>
        <dd>{when(token.created_at)}</dd>
        <dt>Last used</dt>
        <dd>{token.last_used_at ? when(token.last_used_at) : "never"}</dd>
        <dt>Expires</dt>
        <dd>{token.expires_at ? when(token.expires_at) : "never (until revoked)"}</dd>
        {token.revoked_at && (
          <>
            <dt>Revoked</dt>
            <dd data-testid="token-revoked-at">{when(token.revoked_at)}; every request with it gets 401</dd>
          </>
        )}
      </dl>
      {!token.revoked_at && (
        <form
          className="decide"
          aria-label="Revoke access token"
          onSubmit={(e) => {
            e.preventDefault();
            if (!locked && reason.trim()) revoke.mutate();
          }}
        >
          <ReasonField
            id={reasonId}
            label="Reason (required; recorded with your role name)"
            value={reason}
            onChange={setReason}
            disabled={locked}
            testId="revoke-reason"
          />
          {blocked && (
            <p className="notice" role="note" data-testid="revoke-limitation">
              {blocked}
            </p>
          )}
          <div className="buttons">
            <button type="submit" className="danger" disabled={locked || !reason.trim()} data-testid="revoke-submit">
              Revoke token
            </button>
          </div>
        </form>
      )}
    </article>
  );
}

/**
 * The MCP server's HTTP access tokens: who each one speaks as and where, when it was issued and
 * last used, and the operator's revocation of one (with a reason, under the operator's own role).
 */
export function AccessTokens({ session }: { session: OperatorRights }) {
  const [selected, setSelected] = useState<string | null>(null);
  const [revoked, setRevoked] = useState<TokenRevocation | null>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const tokens = useQuery({ queryKey: ["tokens"], queryFn: () => commands.accessTokens(null) });
  const rows = tokens.data ?? [];
  const open = rows.find((t) => t.id === selected);
  const blocked = revokeBlocked(session);
  return (
    <section aria-labelledby="tokens-title">
      <h2 id="tokens-title">Access tokens (MCP)</h2>
      <p className="muted">
        Access tokens of the MCP server (HTTP and stdio), issued by an operator with{" "}
        <code>mesh-memory mcp token create</code>, which records the role and the reason. Each one speaks as one person
        in one conversation; a revoked or expired token&apos;s next request gets 401. Open a token to revoke it.
      </p>
      {blocked && (
        <div className="notice" role="note" data-testid="tokens-limitation">
          {blocked}
        </div>
      )}
      {refusal && (
        <p className="notice error" role="alert" data-testid="revoke-error" data-token-id={refusal.tokenId}>
          Token {shortId(refusal.tokenId)} was not revoked: {refusal.message}. Nothing was written; the list below is
          refreshed.
        </p>
      )}
      {revoked && (
        <p className="notice success" role="status" data-testid="revoke-result">
          Token {shortId(revoked.token_id)} revoked by <strong>{revoked.revoked_by}</strong>; its next request gets 401.
        </p>
      )}
      {tokens.isPending && <Loading what="access tokens" />}
      {tokens.isError && <ErrorNote error={tokens.error} onRetry={() => tokens.refetch()} />}
      {tokens.isSuccess && rows.length === 0 && <Empty>No access token has been issued.</Empty>}
      {rows.length > 0 && (
        <DataTable
          label="Access tokens"
          testId="tokens-table"
          data={rows}
          columns={columns}
          rowId={(t) => t.id}
          selectedId={selected}
          onOpen={(t) => setSelected(t.id)}
        />
      )}
      {open && (
        <TokenPanel
          key={open.id}
          token={open}
          session={session}
          onRevoked={(revocation) => {
            setRefusal(null);
            setRevoked(revocation);
          }}
          onRefused={(refused) => {
            setRevoked(null);
            setRefusal(refused);
          }}
        />
      )}
    </section>
  );
}
