import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  commands,
  errorMessage,
  type ConsoleError,
  type ErasureCounts,
  type ErasureReport,
  type ErasureScope,
  type OperatorRights,
} from "../api";
import { ErrorNote, Loading } from "./Status";
import { ReasonField } from "./ReasonField";

/** Why this session may not erase, or `null` when it may. */
export function eraseBlocked(session: OperatorRights): string | null {
  return session.can_erase ? null : (session.erase_limitation ?? "This role may not erase stored text.");
}

/** The word the operator types before the confirm button enables. */
export const CONFIRM_WORD = "erase";

/** The preview's counts, each with the words the CLI uses. */
const COUNTS: { key: keyof ErasureCounts; label: string }[] = [
  { key: "revisions", label: "revisions (their text)" },
  { key: "messages", label: "messages sent" },
  { key: "source_messages", label: "messages learned from" },
  { key: "replies", label: "replies" },
  { key: "turns", label: "turn records" },
  { key: "entries", label: "entries retired" },
  { key: "sharing_requests", label: "sharing requests" },
  { key: "embeddings", label: "embeddings" },
];

/** Why a message is erased whole, in the words the preview shows. */
const MESSAGE_KINDS: Record<string, string> = {
  message: "sent by the person:",
  source: "learned from:",
  reply: "reply:",
};

function isConflict(error: unknown): boolean {
  return !!error && typeof error === "object" && (error as ConsoleError).kind === "conflict";
}

/** The counts of a preview or a report, in one line. */
export function countsLine(counts: ErasureCounts): string {
  return COUNTS.map((c) => `${counts[c.key]} ${c.label.replace(" (their text)", "")}`).join(", ");
}

/**
 * An erasure, confirmed in three steps: the preview of what it reaches (counts per kind and the
 * text of every revision that goes), a required reason, and the typed word `erase`. The erasure
 * confirms exactly the previewed objects; if what the scope reaches changed since, it is refused,
 * and the preview is read again for the operator to check (nothing typed is lost).
 */
export function EraseDialog({
  scope,
  title,
  onClose,
  onErased,
}: {
  scope: ErasureScope;
  /** What is erased, in words ("Erase entry …1234", "Erase everything about or told by Alex"). */
  title: string;
  onClose: () => void;
  onErased: (report: ErasureReport) => void;
}) {
  const queryClient = useQueryClient();
  const [reason, setReason] = useState("");
  const [typed, setTyped] = useState("");
  const [refusal, setRefusal] = useState<{ message: string; conflict: boolean } | null>(null);
  const preview = useQuery({
    queryKey: ["erasure-preview", scope],
    queryFn: () => commands.previewErasure(scope),
    gcTime: 0,
  });
  const erase = useMutation({
    mutationFn: (objectIds: string[]) => commands.erase(scope, objectIds, reason.trim()),
    onSuccess: (report) => {
      setRefusal(null);
      // Every view may show what was erased (bodies, lineage, lists, queues).
      queryClient.invalidateQueries();
      onErased(report);
    },
    onError: (error) => {
      const conflict = isConflict(error);
      setRefusal({ message: errorMessage(error), conflict });
      if (conflict) preview.refetch();
    },
  });
  const p = preview.data;
  const nothing = !!p && p.object_ids.length === 0;
  const ready =
    !!p && !nothing && !preview.isFetching && !erase.isPending && !!reason.trim() && typed.trim() === CONFIRM_WORD;
  const reasonId = "erase-reason";
  const confirmId = "erase-confirm-word";
  return (
    <div className="dialog-over" role="dialog" aria-modal="true" aria-label={title} data-testid="erase-dialog">
      <form
        className="card dialog-card decide"
        aria-label="Confirm erasure"
        onSubmit={(e) => {
          e.preventDefault();
          if (ready && p) erase.mutate(p.object_ids);
        }}
      >
        <h3>{title}</h3>
        <p className="muted">
          Erasure removes the text for good and keeps the skeleton (who, when, lineage), recorded with your role name and
          the reason. It cannot be undone.
        </p>
        {preview.isPending && <Loading what="erasure preview" />}
        {preview.isError && <ErrorNote error={preview.error} onRetry={() => preview.refetch()} />}
        {p && (
          <div data-testid="erase-preview">
            <dl className="facts counts" aria-label="What the erasure reaches">
              {COUNTS.map((c) => (
                <div key={c.key} className="count" data-testid={`erase-count-${c.key}`}>
                  <dt>{c.label}</dt>
                  <dd>{p.counts[c.key]}</dd>
                </div>
              ))}
            </dl>
            {nothing ? (
              <p className="notice" role="note" data-testid="erase-nothing">
                Nothing left to erase here: everything it reaches is erased already.
              </p>
            ) : (
              <>
                <h4>Text that goes ({p.revisions.length} revisions)</h4>
                <ul className="excerpts" data-testid="erase-excerpts">
                  {p.revisions.map((r) => (
                    <li key={r.revision_id}>
                      <code>…{r.entry}</code> {r.excerpt}
                    </li>
                  ))}
                </ul>
                {p.messages.length > 0 && (
                  <>
                    <h4>Messages erased whole ({p.messages.length})</h4>
                    <ul className="excerpts" data-testid="erase-messages">
                      {p.messages.map((m) => (
                        <li key={m.message_id}>
                          <em>{MESSAGE_KINDS[m.kind] ?? m.kind}</em> {m.excerpt}
                        </li>
                      ))}
                    </ul>
                  </>
                )}
              </>
            )}
          </div>
        )}
        {refusal && (
          <p className="notice error" role="alert" data-testid="erase-error">
            Nothing was erased: {refusal.message}
            {refusal.conflict && " The preview above is read again: check it, then confirm again."}
          </p>
        )}
        <ReasonField
          id={reasonId}
          label="Reason (required; recorded with your role name, e.g. a ticket reference)"
          value={reason}
          onChange={setReason}
          disabled={erase.isPending}
          testId="erase-reason"
        />
        <label htmlFor={confirmId}>
          Type <strong>{CONFIRM_WORD}</strong> to confirm
        </label>
        <input
          id={confirmId}
          value={typed}
          onChange={(e) => setTyped(e.target.value)}
          autoComplete="off"
          spellCheck={false}
          disabled={erase.isPending}
          data-testid="erase-confirm-word"
        />
        <div className="buttons">
          <button type="submit" className="danger" disabled={!ready} data-testid="erase-submit">
            {erase.isPending ? "Erasing…" : "Erase permanently"}
          </button>
          <button type="button" onClick={onClose} disabled={erase.isPending} data-testid="erase-cancel">
            Cancel
          </button>
        </div>
      </form>
    </div>
  );
}

/** The outcome of an erasure, with its id and who did it; `verify` checks it on demand. */
export function ErasureResult({ report }: { report: ErasureReport }) {
  const verify = useMutation({ mutationFn: () => commands.verifyErasure(report.erasure_id) });
  const v = verify.data;
  const clean = v?.clean ?? false;
  return (
    <div className="notice success" role="status" data-testid="erase-result">
      Erasure <code>{report.erasure_id}</code> done: erased by <strong>{report.erased_by}</strong> ({countsLine(report.counts)}).
      {!report.fingerprinted && (
        <span className="muted"> No fingerprints were recorded (MESH_AGENT_MASTER_KEY is unset).</span>
      )}{" "}
      <button type="button" className="link" onClick={() => verify.mutate()} disabled={verify.isPending} data-testid="erase-verify">
        Verify
      </button>
      {verify.isError && <ErrorNote error={verify.error} />}
      {v && (
        <span data-testid="erase-verification">
          {" "}
          {clean ? "Verified clean" : "NOT clean"}: {v.bodies_not_erased} bodies not erased, {v.embeddings_left} embeddings
          left, {v.projection_rows_left} search rows left
          {v.external_index ? `, ${v.external_points_left} ${v.external_index} points left` : ""}
          {v.stale_statistics.length > 0
            ? `, statistics older than the erasure in ${v.stale_statistics.join(", ")} (ANALYZE them)`
            : ""}
          {v.text_scan_unavailable ? ` (text scan not run: ${v.text_scan_unavailable})` : `, ${v.text_found.length} text found`}.
        </span>
      )}
    </div>
  );
}
