import { useEffect, useMemo, useState } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { ColumnDef } from "@tanstack/react-table";
import { commands, shortId, when, type BrowseFilter, type EntryState, type EntrySummary } from "../api";
import { DataTable } from "../components/DataTable";
import { Empty, ErrorNote, Loading } from "../components/Status";

const columns: ColumnDef<EntrySummary, unknown>[] = [
  { header: "Entry", accessorKey: "entry_id", cell: (c) => <code>{shortId(c.getValue() as string)}</code> },
  { header: "Memory", accessorKey: "body_preview", cell: (c) => <span className="body">{c.getValue() as string}</span> },
  { header: "Subject", accessorKey: "subject_label", cell: (c) => (c.getValue() as string | null) ?? <em>unresolved</em> },
  { header: "Agent", accessorKey: "agent_name" },
  { header: "Rev", accessorKey: "revision_number" },
  {
    header: "State",
    id: "state",
    cell: ({ row }) => (
      <span className="tags">
        <span className={`badge ${row.original.state === "live" ? "ok" : "muted"}`}>{row.original.state}</span>
        {row.original.always_on && <span className="badge">always-on</span>}
        {row.original.restriction !== "none" && <span className="badge">{row.original.restriction}</span>}
        {row.original.evidence_unknown && <span className="badge warn">evidence unknown</span>}
      </span>
    ),
  },
  { header: "Updated", accessorKey: "updated_at", cell: (c) => when(c.getValue() as string) },
];

function useDebounced<T>(value: T, ms: number): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setDebounced(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return debounced;
}

/** The memory browser: filters, keyset-paginated list, Enter/click opens an entry. */
export function MemoryBrowser({ onOpen }: { onOpen: (entryId: string) => void }) {
  const [agent, setAgent] = useState("");
  const [subject, setSubject] = useState("");
  const [state, setState] = useState<EntryState | "">("");
  const [text, setText] = useState("");
  const debouncedText = useDebounced(text, 250);
  const filter: BrowseFilter = useMemo(
    () => ({ agent: agent || null, subject: subject || null, state: state || null, text: debouncedText || null }),
    [agent, subject, state, debouncedText],
  );

  const agents = useQuery({ queryKey: ["agents"], queryFn: () => commands.listAgents() });
  const subjects = useQuery({
    queryKey: ["subjects", agent],
    queryFn: () => commands.listSubjects(agent || null),
  });
  const pages = useInfiniteQuery({
    queryKey: ["entries", filter],
    queryFn: ({ pageParam }) => commands.browseEntries(filter, pageParam),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_after,
  });
  const rows = pages.data?.pages.flatMap((p) => p.entries) ?? [];

  return (
    <section aria-labelledby="memory-title">
      <h2 id="memory-title">Memory</h2>
      <form className="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input
            type="search"
            placeholder="words, or an entry / revision id"
            value={text}
            onChange={(e) => setText(e.target.value)}
            data-testid="memory-search"
          />
        </label>
        <label>
          Agent
          <select value={agent} onChange={(e) => setAgent(e.target.value)}>
            <option value="">All agents</option>
            {agents.data?.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name} ({a.live_entries})
              </option>
            ))}
          </select>
        </label>
        <label>
          Subject
          <select value={subject} onChange={(e) => setSubject(e.target.value)}>
            <option value="">Anyone</option>
            {subjects.data?.map((s) => (
              <option key={s.id} value={s.id}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          State
          <select value={state} onChange={(e) => setState(e.target.value as EntryState | "")}>
            <option value="">Any</option>
            <option value="live">Live</option>
            <option value="forgotten">Forgotten</option>
          </select>
        </label>
      </form>
      {pages.isPending && <Loading what="memory" />}
      {pages.isError && <ErrorNote error={pages.error} onRetry={() => pages.refetch()} />}
      {pages.isSuccess && rows.length === 0 && <Empty>No memory matches these filters.</Empty>}
      {rows.length > 0 && (
        <DataTable
          label="Memory entries"
          testId="memory-table"
          data={rows}
          columns={columns}
          rowId={(r) => r.entry_id}
          onOpen={(r) => onOpen(r.entry_id)}
        />
      )}
      {pages.hasNextPage && (
        <button type="button" onClick={() => pages.fetchNextPage()} disabled={pages.isFetchingNextPage}>
          {pages.isFetchingNextPage ? "Loading…" : "Load more"}
        </button>
      )}
    </section>
  );
}
