import { useEffect, useRef, useState } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { ColumnDef } from "@tanstack/react-table";
import { commands, shortId, toldOn, when, type RetrievalEventRow } from "../api";
import { DataTable } from "../components/DataTable";
import { ScoreChart } from "../components/ScoreChart";
import { Empty, ErrorNote, Loading } from "../components/Status";

const columns: ColumnDef<RetrievalEventRow, unknown>[] = [
  { header: "When", accessorKey: "created_at", cell: (c) => when(c.getValue() as string) },
  { header: "Agent", accessorKey: "agent_name" },
  { header: "Conversation", accessorKey: "conversation_title" },
  { header: "Mode", accessorKey: "mode" },
  {
    header: "Destination audience",
    accessorKey: "audience_labels",
    cell: (c) => (c.getValue() as string[]).join(", ") || <em>nobody</em>,
  },
  { header: "Selected", accessorKey: "selected_count" },
  {
    header: "Degradation",
    accessorKey: "degradation_category",
    cell: (c) =>
      (c.getValue() as string | null) ? (
        <span className="badge warn">{c.getValue() as string}</span>
      ) : (
        <span className="badge ok">none</span>
      ),
  },
];

function EventDetail({ eventId, onOpenEntry }: { eventId: string; onOpenEntry: (id: string) => void }) {
  const event = useQuery({ queryKey: ["event", eventId], queryFn: () => commands.retrievalEvent(eventId) });
  const card = useRef<HTMLElement>(null);
  const loaded = event.isSuccess;
  useEffect(() => {
    // Bring the opened event into view (the list can be long).
    if (loaded) card.current?.scrollIntoView?.({ block: "start" });
  }, [loaded, eventId]);
  if (event.isPending) return <Loading what="retrieval event" />;
  if (event.isError) return <ErrorNote error={event.error} onRetry={() => event.refetch()} />;
  const e = event.data;
  const withheld = Object.entries(e.withheld);
  return (
    <article className="card" data-testid="event-detail" aria-label="Retrieval event detail" ref={card}>
      <h3>
        Event <code>{shortId(e.event_id)}</code> <span className="badge">{e.mode}</span>
      </h3>
      <dl className="facts">
        <dt>Destination audience</dt>
        <dd>{e.audience_labels.join(", ") || "nobody"}</dd>
        <dt>Query</dt>
        <dd>
          {e.query_was_empty ? "empty" : "not stored"}; keyed digest {e.has_query_digest ? "recorded" : "not recorded"}
        </dd>
        <dt>Budget</dt>
        <dd>
          {e.cost_tokens} / {e.token_budget} tokens, {e.selections.length} / {e.count_budget} entries, {e.candidate_count}{" "}
          candidates, {(e.elapsed_micros / 1000).toFixed(1)} ms
        </dd>
        <dt>Degradation</dt>
        <dd>{e.degradation_categories.length ? e.degradation_categories.join(", ") : "none"}</dd>
      </dl>
      <h4>Score components</h4>
      {e.selections.length ? <ScoreChart selections={e.selections} /> : <Empty>Nothing was selected.</Empty>}
      {e.selections.length > 0 && (
        <table className="table compact" aria-label="Selections">
          <thead>
            <tr>
              <th>#</th>
              <th>Entry</th>
              <th>Learned</th>
              <th>Score</th>
              <th>Sources</th>
              <th>Reason</th>
              <th>Tokens</th>
            </tr>
          </thead>
          <tbody>
            {e.selections.map((s, i) => (
              <tr key={s.revision_id}>
                <td>{i + 1}</td>
                <td>
                  <button type="button" className="link" onClick={() => onOpenEntry(s.entry_id)}>
                    {shortId(s.entry_id)} r{s.revision_number}
                  </button>
                </td>
                <td data-testid="selection-learned-at">{toldOn(s.learned_at)}</td>
                <td>{(s.score ?? 0).toFixed(4)}</td>
                <td>{s.components.sources.join(", ")}</td>
                <td>{s.reason}</td>
                <td>{s.cost_tokens}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h4>Skipped as oversized</h4>
      {e.skipped.length ? (
        <ul data-testid="skipped">
          {e.skipped.map((s) => (
            <li key={s.revision_id}>
              <code>{shortId(s.entry_id)}</code> — {s.cost_tokens} tokens ({s.reason.replaceAll("_", " ")})
            </li>
          ))}
        </ul>
      ) : (
        <Empty>None.</Empty>
      )}
      <h4>Withheld by eligibility</h4>
      <p className="muted">Categories and counts only; withheld memory text is never shown.</p>
      {withheld.length ? (
        <ul data-testid="withheld">
          {withheld.map(([category, count]) => (
            <li key={category}>
              <span className="badge warn">{category}</span> × {count}
            </li>
          ))}
        </ul>
      ) : (
        <Empty>Nothing withheld.</Empty>
      )}
    </article>
  );
}

/** Audited retrievals: the list, and one event's selections, components and diagnostics. */
export function RetrievalEvents({ onOpenEntry }: { onOpenEntry: (id: string) => void }) {
  const [selected, setSelected] = useState<string | null>(null);
  const pages = useInfiniteQuery({
    queryKey: ["events"],
    queryFn: ({ pageParam }) => commands.retrievalEvents(null, pageParam),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_after,
  });
  const rows = pages.data?.pages.flatMap((p) => p.events) ?? [];
  return (
    <section aria-labelledby="events-title" className="split">
      <div>
        <h2 id="events-title">Retrieval events</h2>
        {pages.isPending && <Loading what="retrieval events" />}
        {pages.isError && <ErrorNote error={pages.error} onRetry={() => pages.refetch()} />}
        {pages.isSuccess && rows.length === 0 && <Empty>No retrieval has been audited yet.</Empty>}
        {rows.length > 0 && (
          <DataTable
            label="Retrieval events"
            testId="events-table"
            data={rows}
            columns={columns}
            rowId={(r) => r.id}
            selectedId={selected}
            onOpen={(r) => setSelected(r.id)}
          />
        )}
        {pages.hasNextPage && (
          <button type="button" onClick={() => pages.fetchNextPage()}>
            Load more
          </button>
        )}
      </div>
      {selected && <EventDetail eventId={selected} onOpenEntry={onOpenEntry} />}
    </section>
  );
}
