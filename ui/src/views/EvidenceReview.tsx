import { useState } from "react";
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { ColumnDef } from "@tanstack/react-table";
import {
  commands,
  errorMessage,
  shortId,
  when,
  type ActorChoice,
  type EvidenceReviewDecision,
  type EvidenceReviewItem,
  type OperatorRights,
  type ReviewedSource,
  type UnknownSource,
} from "../api";
import { DataTable } from "../components/DataTable";
import { Empty, ErrorNote, Loading } from "../components/Status";

const columns: ColumnDef<EvidenceReviewItem, unknown>[] = [
  { header: "Entry", accessorKey: "entry_id", cell: (c) => <code>{shortId(c.getValue() as string)}</code> },
  { header: "Memory", accessorKey: "body_preview", cell: (c) => <span className="body">{c.getValue() as string}</span> },
  { header: "Agent", accessorKey: "agent_name" },
  { header: "Rev", accessorKey: "revision_number" },
  { header: "Unknown sources", accessorKey: "unknown_sources" },
  { header: "Kinds", accessorKey: "unknown_source_kinds", cell: (c) => (c.getValue() as string[]).join(", ") },
  { header: "Why unknown", accessorKey: "evidence_bases", cell: (c) => (c.getValue() as string[]).join("; ") },
  { header: "Written", accessorKey: "created_at", cell: (c) => when(c.getValue() as string) },
];

type Outcome = "proven" | "leave_unknown";

/** The decision the form describes, or why it cannot be sent yet. */
export function reviewDecision(outcome: Outcome, audience: string[]): EvidenceReviewDecision | string {
  if (outcome === "leave_unknown") return { kind: "leave_unknown" };
  return audience.length ? { kind: "proven", audience } : "Choose at least one actor who could read this source.";
}

/** Where a source came from, in words. */
function SourceFacts({ source, labels }: { source: UnknownSource; labels: Map<string, string> }) {
  const label = (id: string | null) => (id ? (labels.get(id) ?? shortId(id)) : "unknown");
  return (
    <dl className="facts">
      <dt>Source</dt>
      <dd>
        {source.kind.replaceAll("_", " ")} <code>{shortId(source.source_id)}</code>
      </dd>
      {source.message_id && (
        <>
          <dt>Said</dt>
          <dd>
            by {label(source.sender)}
            {source.sender_authenticated ? " (authenticated)" : " (not authenticated)"} in{" "}
            {source.conversation_title || "an untitled conversation"} (topology {source.conversation_topology}),{" "}
            {when(source.sent_at)}
          </dd>
        </>
      )}
      {source.excerpt && (
        <>
          <dt>{source.message_id ? "Message" : "Revision"}</dt>
          <dd className="quote">{source.excerpt}</dd>
        </>
      )}
      <dt>Why unknown</dt>
      <dd>{source.evidence_basis}</dd>
      {source.kept_unknown_by && (
        <>
          <dt>Last review</dt>
          <dd data-testid="kept-unknown">
            left unknown by <strong>{source.kept_unknown_by}</strong> {when(source.kept_unknown_at)} —{" "}
            {source.kept_unknown_note}
          </dd>
        </>
      )}
    </dl>
  );
}

/** The review of one source: mark the proven audience or leave it unknown, with a note. */
function SourceReviewForm({
  source,
  choices,
  session,
  onReviewed,
}: {
  source: UnknownSource;
  choices: ActorChoice[];
  session: OperatorRights;
  onReviewed: (reviewed: ReviewedSource) => void;
}) {
  const queryClient = useQueryClient();
  const [outcome, setOutcome] = useState<Outcome>("proven");
  const [audience, setAudience] = useState<string[]>([]);
  const [note, setNote] = useState("");
  const decision = reviewDecision(outcome, audience);
  const review = useMutation({
    mutationFn: (d: EvidenceReviewDecision) => commands.reviewSourceEvidence(source.source_id, d, note.trim()),
    onSuccess: (reviewed) => {
      onReviewed(reviewed);
      // The queue, this revision, its entry's lineage and the browser's evidence flags all change.
      queryClient.invalidateQueries();
    },
  });
  const blocked = session.can_review_evidence
    ? null
    : (session.limitation ?? "This role may not review audience evidence.");
  const members = new Set(source.members_when_sent);
  const id = (what: string) => `${what}-${source.source_id}`;
  const toggle = (actor: string, on: boolean) =>
    setAudience((chosen) => (on ? [...chosen, actor] : chosen.filter((a) => a !== actor)));
  const labels = new Map(choices.map((c) => [c.id, c.label]));
  // Each control is disabled itself (not only through the fieldset), so every client agrees.
  const locked = !!blocked || review.isPending;
  return (
    <article className="card" data-testid={`review-source-${source.source_id}`} aria-label={`Source ${shortId(source.source_id)}`}>
      <SourceFacts source={source} labels={labels} />
      <form
        className="decide"
        aria-label="Evidence review"
        onSubmit={(e) => {
          e.preventDefault();
          if (typeof decision !== "string" && !blocked) review.mutate(decision);
        }}
      >
        <fieldset>
          <legend>Outcome</legend>
          <label className="inline">
            <input
              type="radio"
              name={id("outcome")}
              checked={outcome === "proven"}
              onChange={() => setOutcome("proven")}
              disabled={locked}
              data-testid="review-outcome-proven"
            />{" "}
            Mark the proven audience
          </label>
          <label className="inline">
            <input
              type="radio"
              name={id("outcome")}
              checked={outcome === "leave_unknown"}
              onChange={() => setOutcome("leave_unknown")}
              disabled={locked}
              data-testid="review-outcome-unknown"
            />{" "}
            Leave unknown (stays withheld)
          </label>
          {outcome === "proven" && (
            <div className="choices" role="group" aria-label="Proven audience">
              {choices.length === 0 && <Empty>No actor is recorded for this agent.</Empty>}
              {choices.map((c) => (
                <label key={c.id} className="inline">
                  <input
                    type="checkbox"
                    checked={audience.includes(c.id)}
                    onChange={(e) => toggle(c.id, e.target.checked)}
                    disabled={locked}
                    data-testid={`audience-${c.id}`}
                  />{" "}
                  {c.label}
                  {c.id === source.sender ? <span className="badge">sender</span> : null}
                  {members.has(c.id) ? <span className="badge">member when sent</span> : null}
                </label>
              ))}
            </div>
          )}
          <label htmlFor={id("note")}>Note (required; recorded with your role name)</label>
          <textarea
            id={id("note")}
            value={note}
            onChange={(e) => setNote(e.target.value)}
            rows={2}
            maxLength={2000}
            disabled={locked}
            data-testid="review-note"
          />
        </fieldset>
        {blocked && (
          <p className="notice" role="note" data-testid="review-limitation">
            {blocked}
          </p>
        )}
        {!blocked && typeof decision === "string" && <p className="muted">{decision}</p>}
        <div className="buttons">
          <button
            type="submit"
            className="primary"
            disabled={!!blocked || typeof decision === "string" || !note.trim() || review.isPending}
            data-testid="review-submit"
          >
            Record review
          </button>
        </div>
        {review.isError && (
          <p className="error" role="alert" data-testid="review-error">
            {errorMessage(review.error)}
          </p>
        )}
      </form>
    </article>
  );
}

/** One queued revision opened for review: its body and each source of unknown evidence. */
function ReviewPanel({
  revisionId,
  session,
  onReviewed,
}: {
  revisionId: string;
  session: OperatorRights;
  onReviewed: (reviewed: ReviewedSource) => void;
}) {
  const detail = useQuery({
    queryKey: ["review-detail", revisionId],
    queryFn: () => commands.evidenceReviewDetail(revisionId),
  });
  if (detail.isPending) return <Loading what="sources" />;
  if (detail.isError) return <ErrorNote error={detail.error} onRetry={() => detail.refetch()} />;
  const d = detail.data;
  return (
    <section className="review-panel" data-testid="review-panel" aria-label={`Review of revision ${d.revision_number}`}>
      <h3>
        Entry <code>{shortId(d.entry_id)}</code>, revision {d.revision_number}
      </h3>
      <p className="quote">{d.body}</p>
      {d.sources.length === 0 && <Empty>Every source of this revision has known evidence now.</Empty>}
      {d.sources.map((s) => (
        <SourceReviewForm key={s.source_id} source={s} choices={d.audience_choices} session={session} onReviewed={onReviewed} />
      ))}
    </section>
  );
}

/**
 * Current revisions withheld from retrieval because a source's audience is not proven, and the
 * operator's review of each such source (a proven audience, or a note that it stays unknown).
 */
export function EvidenceReview({
  session,
  onOpenEntry,
}: {
  session: OperatorRights;
  onOpenEntry: (id: string, tab?: "history" | "lineage") => void;
}) {
  const [selected, setSelected] = useState<string | null>(null);
  const [reviewed, setReviewed] = useState<ReviewedSource | null>(null);
  const pages = useInfiniteQuery({
    queryKey: ["review"],
    queryFn: ({ pageParam }) => commands.evidenceReview(pageParam),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_after,
  });
  const rows = pages.data?.pages.flatMap((p) => p.items) ?? [];
  return (
    <section aria-labelledby="review-title">
      <h2 id="review-title">Evidence review</h2>
      <p className="muted">
        These memories are withheld from every conversation until their audience is established or a sharing grant
        releases them. Open one to review its sources.
      </p>
      {reviewed && (
        <p className="notice success" role="status" data-testid="review-result">
          Source {shortId(reviewed.source_id)}{" "}
          {reviewed.evidence_known ? "now has a proven audience" : "stays unknown; your note was recorded"}, reviewed by{" "}
          <strong>{reviewed.reviewed_by}</strong>.{" "}
          <button
            type="button"
            className="link"
            onClick={() => onOpenEntry(reviewed.entry_id, "lineage")}
            data-testid="open-reviewed-lineage"
          >
            Open its lineage
          </button>
        </p>
      )}
      {pages.isPending && <Loading what="evidence review" />}
      {pages.isError && <ErrorNote error={pages.error} onRetry={() => pages.refetch()} />}
      {pages.isSuccess && rows.length === 0 && <Empty>No memory is waiting for evidence review.</Empty>}
      {rows.length > 0 && (
        <DataTable
          label="Revisions with unknown audience evidence"
          testId="review-table"
          data={rows}
          columns={columns}
          rowId={(r) => r.revision_id}
          selectedId={selected}
          onOpen={(r) => setSelected(r.revision_id)}
        />
      )}
      {pages.hasNextPage && (
        <button type="button" onClick={() => pages.fetchNextPage()}>
          Load more
        </button>
      )}
      {selected && <ReviewPanel revisionId={selected} session={session} onReviewed={setReviewed} />}
    </section>
  );
}
