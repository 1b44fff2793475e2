import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import {
  commands,
  erasureNote,
  shortId,
  toldOn,
  when,
  type EntryDetail,
  type ErasureReport,
  type ErasureScope,
  type OperatorRights,
  type RevisionView as Revision,
} from "../api";
import { diffWords } from "../diff";
import { ErrorNote, Loading } from "../components/Status";
import { LineageGraph, LineageList } from "../components/LineageGraph";
import { EraseDialog, ErasureResult, eraseBlocked } from "../components/EraseDialog";

function BodyDiff({ before, after }: { before: string; after: string }) {
  return (
    <p className="diff" data-testid="body-diff">
      {diffWords(before, after).map((part, i) =>
        part.kind === "same" ? (
          <span key={i}>{part.text}</span>
        ) : part.kind === "added" ? (
          <ins key={i}>{part.text}</ins>
        ) : (
          <del key={i}>{part.text}</del>
        ),
      )}
    </p>
  );
}

function RevisionCard({
  revision,
  previous,
  current,
  personAction,
}: {
  revision: Revision;
  previous?: Revision;
  current: boolean;
  /** The erasure of the subject person, offered where the current revision names them. */
  personAction?: React.ReactNode;
}) {
  const subjectChanged = previous && previous.subject_label !== revision.subject_label;
  // An erased body is the marker: a diff against it says nothing.
  const diffed = previous && !revision.erased && !previous.erased;
  return (
    <article className={`card revision${revision.erased ? " erased" : ""}`} data-testid={`revision-${revision.revision_number}`}>
      <header>
        <strong>Revision {revision.revision_number}</strong> <span className="badge">{revision.operation}</span>
        {current && <span className="badge ok">current</span>}
        {revision.erased && <span className="badge muted">erased</span>}
        <span className="muted"> {when(revision.created_at)} · <code>{shortId(revision.id)}</code></span>
      </header>
      <p className="muted" data-testid="learned-at" title="When it was told: what the memory line says to models">
        Learned {toldOn(revision.learned_at)} (told on that day, UTC)
      </p>
      <dl>
        <dt>Subject</dt>
        <dd>
          <span data-testid="subject-diff">
            {subjectChanged ? (
              <>
                <del>{previous.subject_label ?? "unresolved"}</del> → <ins>{revision.subject_label ?? "unresolved"}</ins>
              </>
            ) : (
              (revision.subject_label ?? <em>unresolved</em>)
            )}
          </span>
          {personAction}
        </dd>
        <dt>Source</dt>
        <dd>{revision.source_label ?? <em>system</em>}</dd>
        <dt>Body</dt>
        <dd>
          {diffed ? <BodyDiff before={previous.body} after={revision.body} /> : <p data-testid="body">{revision.body}</p>}
          {revision.erased && (
            <p className="erased-note" data-testid="erased-note">
              {erasureNote(revision.erased)}
            </p>
          )}
        </dd>
      </dl>
    </article>
  );
}

/** An entry: its revision history with diffs, and the lineage graph of a chosen revision. */
export function EntryDetailView({
  entryId,
  session,
  initialTab = "history",
  onClose,
}: {
  entryId: string;
  /** The signed-in role: whether it may erase, and why not. */
  session: OperatorRights;
  /** The tab shown first (the evidence review opens the lineage it just changed). */
  initialTab?: "history" | "lineage";
  onClose: () => void;
  onOpenEntry?: (id: string) => void;
}) {
  const detail = useQuery({ queryKey: ["entry", entryId], queryFn: () => commands.entryDetail(entryId) });
  const [tab, setTab] = useState<"history" | "lineage">(initialTab);
  const [revisionId, setRevisionId] = useState<string | null>(null);
  const [erasing, setErasing] = useState<{ scope: ErasureScope; title: string } | null>(null);
  const [erased, setErased] = useState<ErasureReport | null>(null);

  if (detail.isPending) return <Loading what="entry" />;
  if (detail.isError) return <ErrorNote error={detail.error} onRetry={() => detail.refetch()} />;
  const d: EntryDetail = detail.data;
  const chosen = d.revisions.find((r) => r.id === (revisionId ?? d.current_revision_id)) ?? d.revisions[d.revisions.length - 1];
  const blocked = eraseBlocked(session);
  const current = d.revisions.find((r) => r.id === d.current_revision_id);
  const person = current?.subject ? { actor: current.subject, name: current.subject_label ?? "this person" } : null;
  const personTitle = person && `Erase everything about or told by ${person.name}`;
  const personAction = person && personTitle && (
    <button
      type="button"
      className="danger small"
      disabled={!!blocked}
      title={blocked ?? `${personTitle}, in this runtime agent`}
      data-testid="erase-person"
      onClick={() =>
        setErasing({ scope: { kind: "person", actor: person.actor, agent: d.runtime_agent_id }, title: personTitle })
      }
    >
      {personTitle}…
    </button>
  );

  return (
    <section aria-labelledby="entry-title" data-testid="entry-detail">
      <div className="section-head">
        <button type="button" className="ghost" onClick={onClose} aria-label="Back to memory list">
          ← Back
        </button>
        <h2 id="entry-title">
          Entry <code>{shortId(d.entry_id)}</code>
        </h2>
        <span className={`badge ${d.state === "live" ? "ok" : "muted"}`}>{d.state}</span>
        {d.always_on && <span className="badge">always-on</span>}
        {d.restriction !== "none" && <span className="badge">{d.restriction}</span>}
        <button
          type="button"
          className="danger"
          disabled={!!blocked}
          title={blocked ?? "Erase the text of every revision of this entry"}
          data-testid="erase-entry"
          onClick={() =>
            setErasing({ scope: { kind: "entry", entry: d.entry_id }, title: `Erase entry ${shortId(d.entry_id)}` })
          }
        >
          Erase entry…
        </button>
      </div>
      {blocked && (
        <p className="notice" role="note" data-testid="erase-limitation">
          Erase is not available: {blocked}
        </p>
      )}
      {erased && <ErasureResult report={erased} />}
      {erasing && (
        <EraseDialog
          scope={erasing.scope}
          title={erasing.title}
          onClose={() => setErasing(null)}
          onErased={(report) => {
            setErasing(null);
            setErased(report);
          }}
        />
      )}
      <div role="tablist" aria-label="Entry views" className="tabs">
        <button
          role="tab"
          type="button"
          aria-selected={tab === "history"}
          data-testid="tab-history"
          onClick={() => setTab("history")}
        >
          Revision history ({d.revisions.length})
        </button>
        <button
          role="tab"
          type="button"
          aria-selected={tab === "lineage"}
          data-testid="tab-lineage"
          onClick={() => setTab("lineage")}
        >
          Lineage
        </button>
      </div>
      {tab === "history" && (
        <div role="tabpanel" aria-label="Revision history" data-testid="history-panel">
          {[...d.revisions].reverse().map((r) => {
            const previous = d.revisions.find((p) => p.revision_number === r.revision_number - 1);
            const isCurrent = r.id === d.current_revision_id;
            return (
              <RevisionCard
                key={r.id}
                revision={r}
                previous={previous}
                current={isCurrent}
                personAction={isCurrent ? personAction : undefined}
              />
            );
          })}
        </div>
      )}
      {tab === "lineage" && chosen && (
        <div role="tabpanel" aria-label="Lineage" data-testid="lineage-panel">
          <label className="inline">
            Revision{" "}
            <select value={chosen.id} onChange={(e) => setRevisionId(e.target.value)}>
              {d.revisions.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.revision_number} ({r.operation})
                </option>
              ))}
            </select>
          </label>
          {chosen.erased && (
            <p className="erased-note" data-testid="lineage-erased-note">
              The text of revision {chosen.revision_number} was {erasureNote(chosen.erased)}
            </p>
          )}
          <LineageGraph detail={d} revision={chosen} />
          <LineageList detail={d} revision={chosen} />
        </div>
      )}
    </section>
  );
}
